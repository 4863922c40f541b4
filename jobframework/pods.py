"""Plain Pods and pod groups to the Workloads Kueue creates for them (Kueue pkg/controller/jobs/pod).

Why this module exists: Kueue also queues bare Pods. A Pod with the queue-name label
is one workload of one pod (pod set ``main``). Pods that share a
``kueue.x-k8s.io/pod-group-name`` (annotation or label) and declare the group's size
in the ``kueue.x-k8s.io/pod-group-total-count`` annotation are one workload named
after the group, created once the group is complete, with one pod set per pod
*role*: pods whose admission-relevant spec is the same share a role, named by the
first 8 hex digits of a SHA-256 over that spec's shape (Kueue pkg/util/pod/pod.go
GenerateRoleHash), so the pod sets here carry the names Kueue gives them.

The role hash is computed over the JSON Go would write for the shape, and
Kubernetes quantities in it are written in their canonical form (``1024Mi`` is
``1Gi``, ``0.5`` is ``500m``): :func:`kueue_es.events.quantities.canonical`. Nested API structs
(affinity, topology spread constraints, resource claims) are written with their keys
in the order the API server sends them, which is Go's field order; a hand-written
manifest in another order gets another (still consistent) role name.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from kueue_es.events import job_owners, manifests, models, quantities, types
from kueue_es.jobframework import goint, integrations, workloads
from kueue_es.jobframework.annotations import (
    IS_GROUP_WORKLOAD_ANNOTATION,
    POD_GROUP_POD_INDEX_LABEL,
    PODSET_LABEL,
    SCHEDULING_GATE,
)
from kueue_es.jobframework.integrations import serving

POD_API = "v1"
GROUP_NAME_KEY = "kueue.x-k8s.io/pod-group-name"  # annotation (read first: WorkloadIdentifierAnnotations) or label
GROUP_TOTAL_COUNT_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
FAST_ADMISSION_ANNOTATION = "kueue.x-k8s.io/pod-group-fast-admission"
SERVING_ANNOTATION = "kueue.x-k8s.io/pod-group-serving"
RETRIABLE_IN_GROUP_ANNOTATION = "kueue.x-k8s.io/retriable-in-group"
ROLE_HASH_ANNOTATION = "kueue.x-k8s.io/role-hash"
POD_FINALIZER = "kueue.x-k8s.io/managed"

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


# -- which pods, which workload -------------------------------------------------------------------


def group_name(pod: Mapping[str, Any]) -> str:
    """The pod's group: the annotation, else the label (pkg/util/pod GetPodGroupName); "" for a single pod."""
    ref = _ref(pod)
    return str(ref.annotations.get(GROUP_NAME_KEY) or ref.labels.get(GROUP_NAME_KEY) or "")


def is_managed(pod: Mapping[str, Any], context: workloads.Context) -> bool:
    """Whether Kueue's pod integration manages the pod: all of (pod_controller.go Skip, then
    jobframework/reconciler.go ReconcileGenericJob)

    1. it carries ``kueue.x-k8s.io/managed: "true"``, which only Kueue puts on a pod: its pod webhook
       at creation, on a pod it gates (queue-labelled, or any under ``manageJobsWithoutQueueName``, in
       a namespace ``managedJobsNamespaceSelector`` selected then), a Deployment's template, a
       StatefulSet's or LeaderWorkerSet's pod reconciler (:func:`serving.pod_defaults`). A pod created
       without it -- before Kueue ran, in a namespace the selector left out, while the pod framework
       was off -- is never taken over, whatever labels it or its namespace get later;
    2. with the pod integration enabled only implicitly (``context.pod_integration_implicit``), it
       carries ``kueue.x-k8s.io/pod-suspending-parent``: only the pods of a Deployment, StatefulSet or
       LeaderWorkerSet are taken;
    3. ``managedJobsNamespaceSelector`` selects its namespace (``context.namespace_managed``;
       kube-system and kueue-system are left out by default);
    4. it names a queue, or ``manageJobsWithoutQueueName`` is on;
    5. its controller is neither a job Kueue manages that the watcher has seen (the pod is part of that
       job's workload; the webhook, which walked the owners by UID at creation, put no label on such a
       pod: one whose job is not managed, or not the one its reference's UID names, is its own workload,
       as Kueue's) nor of a kind the
       Configuration's ``integrations.externalFrameworks`` names (``context.external_owners``;
       Kueue asks whether that owner is managed, the watcher cannot see it and assumes so).

    Kueue asks 1 and 2 of a pod group's first pod in its cache's order; here every member is asked,
    and a pod that fails is not a member (:mod:`kueue_es.services.watcher.pod_tracking`).
    """
    ref = _ref(pod)
    if ref.labels.get(workloads.MANAGED_LABEL) != "true":
        return False  # the webhook did not mark it: Skip
    if context.pod_integration_implicit and not ref.annotations.get(serving.SUSPENDED_BY_PARENT_ANNOTATION):
        return False  # Skip: "Pod Integration was implicitly enabled but object lacks parent annotation"
    if not context.namespace_managed(ref.namespace):
        return False  # managedJobsNamespaceSelector: the reconciler ignores the namespace's jobs
    if not ref.labels.get(workloads.QUEUE_LABEL) and not context.manage_jobs_without_queue_name:
        return False  # "queue-name label is not set, ignoring the job"
    owner = workloads.controller_owner(ref.meta)
    if owner is not None and (owner.get("apiVersion"), owner.get("kind")) in context.external_owners:
        return False  # integrations.externalFrameworks: an outside controller runs its owner for Kueue
    # no check of the controller's kind: Kueue's pod webhook walked the owners by UID before it put the label
    # on (a pod of a Job that is not managed, or whose reference's UID is not the Job's, is its own workload),
    # and its pod reconciler, a top-level job (pod_controller.go IsTopLevel), walks none; a managed ancestor
    # the watcher has seen still claims the pod, so a label set by hand does not admit it twice
    return not workloads.owned_by_managed_job(ref, context)


def is_job_owner(api_version: Any, kind: Any) -> bool:
    """Whether an owner of this kind is a job the owner walks go through (Kueue's known owners): a batch/v1 Job
    and every integration that suspends its job (a JobSet's Jobs, a PyTorchJob, a RayCluster, ...; not a
    Deployment, StatefulSet or LeaderWorkerSet, whose pods are the workloads). Whether such an owner claims a
    pod is the walk's to say (:func:`kueue_es.jobframework.webhooks.ancestor_managed`): a queue-labelled pod of
    a Job that is not queue-labelled is gated and admitted on its own, as Kueue's pod integration does."""
    if (api_version, kind) == ("batch/v1", "Job"):
        return True
    integration = integrations.by_kind(str(kind))
    return integration is not None and integration.api_version == api_version and integration.suspend_path is not None


def workload_name_for_pod(name: str, uid: str) -> str:
    """``pod-<name>-<5 hex>`` (pod_controller.go GetWorkloadNameForPod)."""
    return workloads.workload_name(owner_name=name, owner_uid=uid, kind="Pod", group="")


def workload_key(pod: Mapping[str, Any]) -> tuple[str, str]:
    """``(namespace, workload name)`` of the workload a pod belongs to: the prebuilt Workload it names
    (``kueue.x-k8s.io/prebuilt-workload-name``), else its group's, else its own (pod_controller.go workloadName)."""
    ref = _ref(pod)
    name = prebuilt_workload(pod) or group_name(pod)
    return ref.namespace, name or workload_name_for_pod(ref.name, ref.uid)


def prebuilt_workload(pod: Mapping[str, Any]) -> str:
    """The prebuilt Workload the pod runs on (``kueue.x-k8s.io/prebuilt-workload-name``, the annotation read
    first: :func:`kueue_es.jobframework.workloads.prebuilt_workload`), "" for none. A StatefulSet's or
    LeaderWorkerSet's pod names its serving group's, which Kueue's reconciler of that parent prebuilds and
    kueue-es makes from the group's pods instead (:mod:`kueue_es.jobframework.integrations.serving`): its
    group's own workload, not one to adopt (""). The prebuilt one adopted: :mod:`kueue_es.jobframework.prebuilt`."""
    if serving.parent_framework(pod) in (serving.STATEFULSET_FRAMEWORK, serving.LWS_FRAMEWORK):
        return ""
    return workloads.prebuilt_workload(pod)


def is_gated(pod: Mapping[str, Any]) -> bool:
    """Whether Kueue's scheduling gate still holds the pod (it is suspended until admitted)."""
    spec = pod.get("spec")
    gates = spec.get("schedulingGates") if isinstance(spec, dict) else None
    return any(isinstance(g, dict) and g.get("name") == SCHEDULING_GATE for g in gates or [])


def is_terminated(pod: Mapping[str, Any]) -> bool:
    """Phase Succeeded or Failed (pkg/util/pod IsTerminated)."""
    return _phase(pod) in ("Succeeded", "Failed")


def excess_pods(members: Sequence[Mapping[str, Any]], total: int) -> list[Mapping[str, Any]]:
    """The pods of a group beyond its ``total`` count, which Kueue deletes (pod_controller.go removeExcessPods,
    with the active pods ordered by sortActivePods). Of ``members`` only the active ones count: those that still
    count in the group (:func:`counts_in_group`: a Succeeded pod too, and a running one being deleted, as Kueue's
    partitionPods counts them); those kept are the first ``total`` of them, the ones with Kueue's pod finalizer
    first, then the ungated ones, then the oldest (creationTimestamp, then name). Returns the rest, in that
    order."""
    active = [p for p in members if counts_in_group(p)]
    if len(active) <= total:
        return []

    def kept_first(pod: Mapping[str, Any]) -> tuple[bool, bool, str, str]:
        meta = pod.get("metadata") or {}
        return (
            POD_FINALIZER not in (meta.get("finalizers") or []),
            is_gated(pod),
            str(meta.get("creationTimestamp") or ""),
            str(meta.get("name") or ""),
        )

    return sorted(active, key=kept_first)[total:]


def is_running(pods: Sequence[Mapping[str, Any]], *, now_ms: int | None = None) -> bool:
    """Whether any pod of a workload runs: not gated and not terminated (the inverse of Kueue's IsSuspended).
    With ``now_ms`` (ms since the epoch), a pod being deleted whose grace period has passed by then
    (``deletionTimestamp`` + ``deletionGracePeriodSeconds``) does not count: Kueue's IsActive does not count a
    pod stuck terminating, so its group's quota is released once it was deleted, while Kueue's finalizer keeps
    the pod until a replacement comes (pod_controller.go IsActive)."""
    return any(not is_gated(p) and not is_terminated(p) and not _past_grace(p, now_ms) for p in pods)


def _past_grace(pod: Mapping[str, Any], now_ms: int | None) -> bool:
    meta = workloads.as_mapping(pod.get("metadata"))
    if now_ms is None or not meta.get("deletionTimestamp"):
        return False
    grace = workloads.parse_int(meta.get("deletionGracePeriodSeconds"))
    if grace is None:
        return False  # IsActive asks for both
    return now_ms > _time_ms(meta.get("deletionTimestamp"), default=now_ms) + grace * 1000


# -- a single pod ---------------------------------------------------------------------------------


def pod_facts(
    pod: Mapping[str, Any], *, now_ms: int = 0, context: workloads.Context | None = None
) -> types.Fact | None:
    """The fact a single managed Pod (no group) stands for, or None when Kueue does not manage it.

    A terminated pod gives WorkloadFinished (succeeded when its phase is Succeeded,
    the message the pod's ``status.message``, empty when it has none, whether it
    succeeded or failed: pod_controller.go Finished); any other a
    WorkloadObserved of :func:`pod_workload`; a pod that cannot be converted ObjectRejected.
    """
    context = context or workloads.Context()
    if not is_managed(pod, context) or group_name(pod):
        return None
    ref = _ref(pod)
    if GROUP_TOTAL_COUNT_ANNOTATION in ref.annotations:
        err = ref.error(
            field=f"metadata.labels[{GROUP_NAME_KEY}]",
            problem=f"both the '{GROUP_TOTAL_COUNT_ANNOTATION}' annotation and the '{GROUP_NAME_KEY}' label"
            " should be set",
        )
        return workloads.rejected(pod, err, now_ms=now_ms)
    if is_terminated(pod):
        status = workloads.as_mapping(pod.get("status"))
        succeeded = _phase(pod) == "Succeeded"
        # Kueue's Finished condition carries the pod's own status.message, empty for an ordinary exit
        message = str(status.get("message") or "")
        at_ms = finished_at_ms([pod]) or now_ms
        name = workload_name_for_pod(ref.name, ref.uid)
        return workloads.finished_fact(ref, name=name, succeeded=succeeded, message=message, at_ms=at_ms)
    try:
        workload = pod_workload(pod, context=context)
    except manifests.ManifestError as err:
        return workloads.rejected(pod, err, now_ms=now_ms)
    return types.WorkloadObserved(workload=workload)


def pod_workload(pod: Mapping[str, Any], *, context: workloads.Context) -> models.Workload:
    """The workload Kueue makes for a single pod: ``pod-<name>-<hash>``, one pod set ``main`` of one pod whose
    template is the pod's spec (constructPodSet), owned by the pod. Also what a pod naming a prebuilt Workload
    is compared with (:func:`kueue_es.jobframework.prebuilt.out_of_sync`). Raises ManifestError."""
    ref = _ref(pod)
    queue = workloads.queue_name(ref, context, managed_without_queue=True)
    pod_spec = _spec(ref, pod)
    pod_set = workloads.pod_set(
        ref,
        name="main",
        count=1,
        pod_spec=pod_spec,
        where="spec",
        context=context,
        topology_request=_topology_request(ref, count=1, context=context),
    )
    return workloads.new_workload(
        ref,
        name=workload_name_for_pod(ref.name, ref.uid),
        pod_sets=[pod_set],
        queue=queue or "",
        pod_specs=[("spec", pod_spec)],
        context=context,
        owner=workloads.owner_of(ref),
    )


# -- a pod group ----------------------------------------------------------------------------------


def group_facts(
    pods: Sequence[Mapping[str, Any]], *, now_ms: int = 0, context: workloads.Context | None = None
) -> types.Fact | None:
    """The fact the managed pods of one group (one namespace, one group name) stand for.

    Kueue pod_controller.go, in its order:
    1. the group's size: the total-count annotation, a positive integer (groupTotalCount);
    2. finished (WorkloadFinished) when as many pods succeeded as the group counts, or
       when none still runs and a pod is marked ``retriable-in-group: "false"``; Kueue
       reports both as a success with the message ``Pods succeeded: n/total.``
       (Finished); a serving group never finishes;
    3. None (no workload yet) while fewer pods can run than the group counts, unless
       fast admission is asked for (validatePodGroupMetadata);
    4. every pod not Failed names the same queue and total count, else ObjectRejected naming
       the odd pod (not compared for a StatefulSet's or LeaderWorkerSet's group: Kueue prebuilds
       its Workload, whose pods take the prebuilt path, which validates none of it);
    5. extra pods beyond the count are left out as Kueue deletes them: the gated and
       the youngest first (sortActivePods);
    6. one pod set per role, named by the role hash, counting its pods, sorted by
       name (constructGroupPodSets); with fast admission one pod set of the first
       runnable pod's role counting the whole group (constructGroupPodSetsFast);
       at most 18 roles.
    The workload is named after the group; the first pod (oldest, then by name: Kueue
    takes whichever its cache lists first) gives the queue (a StatefulSet's or LeaderWorkerSet's
    group's: its parent's in ``context.objects``, :func:`_group_queue`), the priority-class label
    and the owner reference; UID and creation time are kept from the workload already
    published (``context.previous``), else the first pod's UID and the time the last
    pod needed arrived.
    """
    context = context or workloads.Context()
    ordered = oldest_first(pods)
    if not ordered:
        return None
    first = ordered[0]
    ref = _ref(first)
    try:
        total = _total_count(ref)
        _check_group_name(ref, group_name(first))
    except manifests.ManifestError as err:
        return workloads.rejected(first, err, now_ms=now_ms)
    uid = context.previous.metadata.uid if context.previous is not None else ref.uid
    finished = group_finished(ordered, total=total, name=group_name(first), uid=uid, now_ms=now_ms)
    if finished is not None:
        return finished
    active = [p for p in ordered if _runnable_or_succeeded(p)]
    fast = ref.annotations.get(FAST_ADMISSION_ANNOTATION) == "true"
    if not active or (not fast and len(active) < total):
        return None
    try:
        _check_members(ref, ordered, total=total)
        workload = _group_workload(ref, _kept(active, total), total=total, fast=fast, context=context)
    except MemberError as err:
        return workloads.rejected(err.pod, err.error, now_ms=now_ms)
    except manifests.ManifestError as err:
        return workloads.rejected(first, err, now_ms=now_ms)
    return types.WorkloadObserved(workload=workload)


GROUP_INCOMPLETE_REASON = "ErrWorkloadCompose"
"""Kueue's reason for a pod group with fewer runnable pods than its count (jobframework.ReasonErrWorkloadCompose)."""
NAME_CONFLICT_REASON = "WorkloadNameConflict"
"""Kueue's reason for a pod group whose name a Workload of something else holds (pod_controller.go)."""
_GROUP_TOTAL_FIELD = f"metadata.annotations[{GROUP_TOTAL_COUNT_ANNOTATION}]"
_GROUP_NAME_FIELD = f"metadata.labels[{GROUP_NAME_KEY}]"


def fewer_pods_message(group: str) -> str:
    """Kueue's words for a pod group still short of pods (pod_controller.go validatePodGroupMetadata)."""
    return f"'{group}' group has fewer runnable pods than expected"


def name_conflict_message(group: str) -> str:
    """Kueue's words for a pod group whose Workload name is taken (pod_controller.go FindMatchingWorkloads)."""
    return (
        f'A Workload named "{group}" already exists but is not a pod group workload; this pod group cannot be admitted'
    )


def incomplete_group(
    pods: Sequence[Mapping[str, Any]], *, now_ms: int = 0, context: workloads.Context | None = None
) -> types.ObjectRejected | None:
    """Kueue's Warning while a pod group that has no Workload yet has fewer runnable (or succeeded) pods than its
    ``kueue.x-k8s.io/pod-group-total-count`` and no fast admission (pod_controller.go validatePodGroupMetadata,
    reached from ConstructComposableWorkload only while the group has no Workload): an ObjectRejected of the
    group's first pod (oldest, then by name: Kueue's ``p.pod``, whichever its cache lists first) on the count
    annotation, with Kueue's message (:func:`fewer_pods_message`; :func:`kueue_reason` gives its reason,
    ErrWorkloadCompose). None for a complete or finished group, one with a Workload (``context.previous``), one
    whose count does not parse (:func:`group_facts` rejects it), and a group of no pods."""
    context = context or workloads.Context()
    ordered = oldest_first(pods)
    if not ordered or context.previous is not None:
        return None
    first = ordered[0]
    ref = _ref(first)
    try:
        total = _total_count(ref)
    except manifests.ManifestError:
        return None
    if ref.annotations.get(FAST_ADMISSION_ANNOTATION) == "true":
        return None
    name = group_name(first)
    if group_finished(ordered, total=total, name=name, uid=ref.uid, now_ms=now_ms) is not None:
        return None
    if sum(1 for p in ordered if _runnable_or_succeeded(p)) >= total:
        return None
    err = ref.error(field=_GROUP_TOTAL_FIELD, problem=fewer_pods_message(name))
    return workloads.rejected(first, err, now_ms=now_ms)


def is_group_workload(workload: models.Workload) -> bool:
    """Whether a Workload was made by the pod group framework (``kueue.x-k8s.io/is-group-workload: "true"``)."""
    return workload.metadata.annotations.get(IS_GROUP_WORKLOAD_ANNOTATION) == "true"


def name_conflict(
    pods: Sequence[Mapping[str, Any]], holder: models.Workload | None, *, now_ms: int = 0
) -> types.ObjectRejected | None:
    """Kueue's refusal of a pod group whose name a Workload of something else holds (``holder``: the Workload
    named after the group, None when there is none): one not made by the pod group framework, a standalone one
    or another job's, is never adopted (pod_controller.go FindMatchingWorkloads with PodIntegrationValidateGroupOwner,
    beta and on). An ObjectRejected of the group's first pod naming its group label, with Kueue's message
    (:func:`name_conflict_message`; :func:`kueue_reason` gives its reason, WorkloadNameConflict); None when the
    name is free or the group's own, or for no pods."""
    ordered = oldest_first(pods)
    if not ordered or holder is None or is_group_workload(holder):
        return None
    first = ordered[0]
    ref = _ref(first)
    err = ref.error(field=_GROUP_NAME_FIELD, problem=name_conflict_message(group_name(first)))
    return workloads.rejected(first, err, now_ms=now_ms)


_KUEUE_WORDED = (
    (_GROUP_TOTAL_FIELD, re.compile(r"'[^']*' group has fewer runnable pods than expected"), GROUP_INCOMPLETE_REASON),
    (
        _GROUP_NAME_FIELD,
        re.compile(
            r'A Workload named "[^"]*" already exists but is not a pod group workload; this pod group cannot be admitted'
        ),
        NAME_CONFLICT_REASON,
    ),
)


_LOGGED_ONLY = (
    # pod_controller.go validatePodGroupMetadata and groupTotalCount
    (
        f"metadata.labels[{workloads.QUEUE_LABEL}]",
        re.compile(r"pods '[^']*' and '[^']*' has different queue names: .*"),
    ),
    (
        _GROUP_TOTAL_FIELD,
        re.compile(rf"pods '[^']*' and '[^']*' has different '{re.escape(GROUP_TOTAL_COUNT_ANNOTATION)}' values: .*"),
    ),
    (
        _GROUP_TOTAL_FIELD,
        re.compile(rf"failed to extract '{re.escape(GROUP_TOTAL_COUNT_ANNOTATION)}' annotation from the pod .*"),
    ),
    (_GROUP_TOTAL_FIELD, re.compile(r'strconv\.Atoi: parsing ".*": (invalid syntax|value out of range)', re.DOTALL)),
    (
        _GROUP_TOTAL_FIELD,
        re.compile(
            rf"incorrect annotation value '{re.escape(GROUP_TOTAL_COUNT_ANNOTATION)}=.*': group total count should be"
            " greater than zero",
            re.DOTALL,
        ),
    ),
    # ConstructComposableWorkload: errMsgIncorrectGroupRoleCount, getByKey's mismatches
    ("", re.compile(r"pod group can't include more than \d+ roles")),
    (None, re.compile(r"constructing workload: pods have different (label|annotation) values")),
)


def kueue_logs_only(fact: types.ObjectRejected) -> bool:
    """Whether a pod's rejection is one of the pod group compose errors Kueue's pod reconciler words itself and
    only logs, recording no Event: the group's pods naming different queues or total counts, a total count that
    does not read (pod_controller.go validatePodGroupMetadata, groupTotalCount), more roles than a Workload holds
    and members copying different label or annotation values (ConstructComposableWorkload); its job reconciler
    logs what they return (reconciler.go handleJobWithNoWorkload). Kueue records an Event only for a group short of
    pods and for a name another Workload holds (:func:`kueue_reason`)."""
    if fact.kind != "Pod":
        return False
    return any(
        (field is None or fact.field == field) and words.fullmatch(fact.problem) for field, words in _LOGGED_ONLY
    )


def kueue_reason(fact: types.ObjectRejected) -> str | None:
    """The reason of the Event Kueue records, in the words of the rejection's problem, for a pod's rejection by
    :func:`incomplete_group` or :func:`name_conflict`; None for any other rejection."""
    if fact.kind != "Pod":
        return None
    for field, words, reason in _KUEUE_WORDED:
        if fact.field == field and words.fullmatch(fact.problem):
            return reason
    return None


class MemberError(Exception):
    """A group member that breaks the group's rules: the pod to name and the error."""

    def __init__(self, pod: Mapping[str, Any], error: manifests.ManifestError) -> None:
        super().__init__(str(error))
        self.pod, self.error = pod, error


def group_finished(
    pods: Sequence[Mapping[str, Any]], *, total: int, name: str, uid: str, now_ms: int
) -> types.WorkloadFinished | None:
    """WorkloadFinished of workload ``name`` (UID ``uid``) when the pod group ``pods`` (oldest first) of ``total``
    pods has finished, else None (pod_controller.go Finished): as many pods succeeded as the group counts, or
    none still runs and a pod is marked ``retriable-in-group: "false"``; both a success with the message ``Pods
    succeeded: n/total.``; a serving group never finishes."""
    ref = _ref(pods[0])
    if ref.annotations.get(SERVING_ANNOTATION) == "true":
        return None
    succeeded = sum(1 for p in pods if _phase(p) == "Succeeded")
    still_active = any(not is_terminated(p) for p in pods)
    unretriable = any(_ref(p).annotations.get(RETRIABLE_IN_GROUP_ANNOTATION) == "false" for p in pods)
    if succeeded != total and (still_active or not unretriable):
        return None
    message = f"Pods succeeded: {succeeded}/{total}."
    at_ms = finished_at_ms(pods) or now_ms
    return workloads.finished_fact(ref, name=name, succeeded=True, message=message, at_ms=at_ms, uid=uid)


def holds_finalizer(pod: Mapping[str, Any]) -> bool:
    """Whether the pod still carries Kueue's ``kueue.x-k8s.io/managed`` finalizer (:data:`POD_FINALIZER`)."""
    return POD_FINALIZER in (workloads.as_mapping(pod.get("metadata")).get("finalizers") or ())


def finalizer_released(
    pod: Mapping[str, Any], *, group_finished: bool = False, workload_finished: bool = False, replaced: bool = False
) -> bool:
    """Whether Kueue's pod reconciler takes the :data:`POD_FINALIZER` off ``pod`` now, its pod webhook having put
    it on at creation (``group_finished``: the pod's group has finished, :func:`group_has_finished`;
    ``workload_finished``: the pod's Workload is Finished, or, for a group, being deleted by hand, whose Stop
    finalizes every pod; ``replaced``: the group member is one :func:`replaced_members` lets go; the last two
    unused for a single pod).

    Only a pod that holds the finalizer and carries ``kueue.x-k8s.io/managed: "true"`` (pod_controller.go Skip:
    any other is not reconciled) is let go:

    - a single pod once it is being deleted (Load: ``removeFinalizers`` for a pod with a ``deletionTimestamp``)
      or terminated, Succeeded or Failed (Finished, then finalizeJob);
    - any pod once its Workload is Finished (reconciler.go: finalizeJob of a finished workload's job);
    - a pod of a group once the group has finished (Finalize lets every pod of the group go);
    - a pod of a group that no longer counts (Failed, or deleted before it got a node) once it is replaced or
      has no Workload to count for (``replaced``: FindMatchingWorkloads' and ConstructComposableWorkload's
      finalizePods). A member being deleted keeps it until then, as in Kueue, so that its group's state stays
      countable: a deleted running member stays, Terminating, until its kubelet writes it Failed and a
      replacement comes (or its group finishes, or its Workload is deleted)."""
    meta = workloads.as_mapping(pod.get("metadata"))
    if not holds_finalizer(pod) or workloads.as_mapping(meta.get("labels")).get(workloads.MANAGED_LABEL) != "true":
        return False
    if workload_finished:
        return True
    if group_name(pod):
        return group_finished or replaced
    return bool(meta.get("deletionTimestamp")) or is_terminated(pod)


def counts_in_group(pod: Mapping[str, Any]) -> bool:
    """Whether a group member still counts for its group: not Failed, and not deleted before it got a node
    (pod_controller.go isPodRunnableOrSucceeded; its partitionPods' active pods). A running member being deleted
    counts until its kubelet writes it Failed."""
    return _runnable_or_succeeded(pod)


def replaced_members(
    members: Sequence[Mapping[str, Any]], pod_sets: Sequence[tuple[str, int]] | None, *, now_ms: int
) -> list[Mapping[str, Any]]:
    """The members of one pod group whose finalizer Kueue's pod reconciler takes off as no longer needed to
    count the group (pod_controller.go finalizePods), of ``members`` (the group's pods seen):

    - ``pod_sets`` None (the group has no Workload): every member that does not count
      (:func:`counts_in_group`; ConstructComposableWorkload finalizes the inactive pods);
    - else, per pod set ``(role hash, count)`` of its Workload, the members of that role that do not count
      beyond those still needed to fill ``count`` with the ones that do: ``min(inactive, inactive + active -
      count)`` of them (FindMatchingWorkloads), taken from the end of Kueue's sortInactivePods order (holding the
      finalizer first, then the one last active the latest, then the oldest): those without the finalizer,
      then the ones inactive longest, go first. A member whose role is not among ``pod_sets`` is not let go.

    ``now_ms``: the time a member neither Failed nor deleted counts as last active (lastActiveTime). A member
    whose role cannot be computed is left out."""
    inactive = [m for m in members if not counts_in_group(m)]
    if pod_sets is None:
        return inactive
    by_role: dict[str, tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]] = {}
    for member in members:
        try:
            role = role_hash(member)
        except quantities.QuantityError:
            continue
        active_of, inactive_of = by_role.setdefault(role, ([], []))
        (active_of if counts_in_group(member) else inactive_of).append(member)
    out: list[Mapping[str, Any]] = []
    for role, count in pod_sets:
        active_of, inactive_of = by_role.get(role, ([], []))
        finalizeable = min(len(inactive_of), len(inactive_of) + len(active_of) - count)
        if finalizeable <= 0:
            continue
        ordered = sorted(inactive_of, key=lambda m: _inactive_order(m, now_ms=now_ms))
        out.extend(ordered[len(ordered) - finalizeable :])
    return out


def _inactive_order(pod: Mapping[str, Any], *, now_ms: int) -> tuple[bool, int, int, str]:
    """sortInactivePods: with the finalizer first, then the later last active first, then the older first."""
    created, name = _age_key(pod)
    return (not holds_finalizer(pod), -_last_active_ms(pod, now_ms=now_ms), created, name)


def _last_active_ms(pod: Mapping[str, Any], *, now_ms: int) -> int:
    """lastActiveTime: the earlier of when its containers failed (ContainersReady False with reason PodFailed)
    and its deletion, ``now_ms`` for either it lacks."""
    failed_ms = now_ms
    status = workloads.as_mapping(pod.get("status"))
    for condition in status.get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == "ContainersReady":
            if condition.get("status") == "False" and condition.get("reason") == "PodFailed":
                failed_ms = _time_ms(condition.get("lastTransitionTime"), default=now_ms)
            break
    deleted_ms = _time_ms(workloads.as_mapping(pod.get("metadata")).get("deletionTimestamp"), default=now_ms)
    return min(failed_ms, deleted_ms)


def _time_ms(value: Any, *, default: int) -> int:
    if not value:
        return default
    try:
        return manifests.parse_time_ms(value)
    except manifests.ManifestError:
        return default


def absent_pods(
    members: Sequence[Mapping[str, Any]], pod_sets: Sequence[tuple[str, int]], *, fast: bool = False
) -> int:
    """How many pods a pod group lacks against its Workload's pod sets ``(role hash, count)``: per pod set, its
    count less the members of that role that still count (:func:`counts_in_group`), none below zero; with fast
    admission (``fast``) 1 for each pod set with a count and no such member (pod_controller.go countAbsentPods).
    More than 0 makes the Workload's WaitingForReplacementPods True (:func:`replacement_condition`)."""
    counted: dict[str, int] = {}
    for member in members:
        if not counts_in_group(member):
            continue
        try:
            role = role_hash(member)
        except quantities.QuantityError:
            continue
        counted[role] = counted.get(role, 0) + 1
    if fast:
        return sum(1 for role, count in pod_sets if count > 0 and not counted.get(role))
    return sum(max(0, count - counted.get(role, 0)) for role, count in pod_sets)


WAITING_FOR_REPLACEMENT_PODS = "WaitingForReplacementPods"
"""The Workload condition of a pod group that lacks pods (kueue.WorkloadWaitingForReplacementPods)."""
PODS_FAILED_REASON = "PodsFailed"
"""Its reason while pods are missing and the Workload is not evicted (pod_controller.go WorkloadPodsFailed)."""
PODS_FAILED_MESSAGE = "Some Failed pods need replacement"
NO_REPLACEMENT_REASON = "PodsReady"
"""Its reason once no pod is missing (kueue.WorkloadPodsReady)."""
NO_REPLACEMENT_MESSAGE = "No pods need replacement"


def replacement_condition(
    existing: Mapping[str, Any] | None,
    *,
    absent: int,
    evicted: tuple[str, str] | None,
    generation: int,
    now: str,
) -> dict[str, Any] | None:
    """A pod group's Workload condition WaitingForReplacementPods as Kueue's pod reconciler keeps it
    (pod_controller.go waitingForReplacementPodsCondition), from the condition the Workload has (``existing``, a
    condition mapping, or None), the pods it lacks (``absent``: :func:`absent_pods`), its Evicted condition when
    True (``evicted``: reason, message), its ``metadata.generation`` and the time now (``now``, RFC 3339).

    - None while it has none and no pod is missing: nothing to write;
    - True while pods are missing: with the Evicted condition's reason and message while that is True (kept in
      step with them), else, on turning True, reason ``PodsFailed`` "Some Failed pods need replacement" (one
      already True keeps its reason and message);
    - False once none is missing: reason ``PodsReady`` "No pods need replacement".

    A change sets ``lastTransitionTime`` to ``now`` and ``observedGeneration``, as Kueue does on any change (not
    only of the status); no change returns ``existing`` as it is."""
    if existing is None and absent <= 0:
        return None
    wanted: dict[str, Any] = dict(existing) if existing is not None else {"type": WAITING_FOR_REPLACEMENT_PODS}
    if absent > 0:
        if evicted is not None:
            wanted["reason"], wanted["message"] = evicted
        elif wanted.get("status") != "True":
            wanted["reason"], wanted["message"] = PODS_FAILED_REASON, PODS_FAILED_MESSAGE
        wanted["status"] = "True"
    elif wanted.get("status") != "False":
        wanted.update(status="False", reason=NO_REPLACEMENT_REASON, message=NO_REPLACEMENT_MESSAGE)
    if existing is not None and wanted == dict(existing):
        return wanted
    wanted["lastTransitionTime"] = now
    if generation:
        wanted["observedGeneration"] = generation
    return wanted


def group_has_finished(members: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the pod group of ``members`` (the pods of one group seen, at least one) has finished as Kueue's
    Finished decides it for its finalizers (pod_controller.go): as many pods Succeeded as its
    ``pod-group-total-count`` (the first member's), or none still running and one marked
    ``retriable-in-group: "false"``; a serving group never finishes, nor one whose count is not a positive
    integer (groupTotalCount's error)."""
    if not members or is_serving(members[0]):
        return False
    try:
        total = group_total_count(members[0])
    except manifests.ManifestError:
        return False
    succeeded = sum(1 for m in members if _phase(m) == "Succeeded")
    unretriable = any(_ref(m).annotations.get(RETRIABLE_IN_GROUP_ANNOTATION) == "false" for m in members)
    return succeeded == total or (unretriable and all(is_terminated(m) for m in members))


def _check_members(ref: workloads.JobRef, pods: Sequence[Mapping[str, Any]], *, total: int) -> None:
    queue = ref.labels.get(workloads.QUEUE_LABEL) or ""
    # a StatefulSet's or LeaderWorkerSet's group is in its parent's LocalQueue, whatever its pods say (_group_queue):
    # Kueue prebuilds its Workload, which its pods name, so its job reconciler takes the prebuilt path and never
    # validates the group's metadata (validatePodGroupMetadata runs from ConstructComposableWorkload only): neither
    # its pods' queues (which differ while they are relabelled) nor their total counts (a pod made after a
    # `kubectl scale`, which no webhook sees, states the new replicas) are compared
    by_parent = bool(pods) and serving.parent_framework(pods[0]) in (
        serving.STATEFULSET_FRAMEWORK,
        serving.LWS_FRAMEWORK,
    )
    if by_parent:
        return
    for pod in pods:
        if _phase(pod) == "Failed":
            continue
        member = _ref(pod)
        other_queue = member.labels.get(workloads.QUEUE_LABEL) or ""
        if other_queue != queue:
            problem = f"pods '{ref.name}' and '{member.name}' has different queue names: {queue}!={other_queue}"
            raise MemberError(pod, member.error(field=f"metadata.labels[{workloads.QUEUE_LABEL}]", problem=problem))
        raw = member.annotations.get(GROUP_TOTAL_COUNT_ANNOTATION)
        try:
            theirs = goint.atoi(str(raw or ""))
        except goint.GoNumError as err:  # Kueue's words (validatePodGroupMetadata)
            problem = (
                f"failed to extract '{GROUP_TOTAL_COUNT_ANNOTATION}' annotation from the pod '{member.name}': {err}"
            )
            raise MemberError(
                pod, member.error(field=f"metadata.annotations[{GROUP_TOTAL_COUNT_ANNOTATION}]", problem=problem)
            ) from err
        if theirs != total:
            problem = (
                f"pods '{ref.name}' and '{member.name}' has different '{GROUP_TOTAL_COUNT_ANNOTATION}' values:"
                f" {total}!={raw}"
            )
            raise MemberError(
                pod, member.error(field=f"metadata.annotations[{GROUP_TOTAL_COUNT_ANNOTATION}]", problem=problem)
            )


def oldest_first(pods: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """``pods`` by creation time, then name: the first is the one a group's workload takes its queue, owner and
    labels from (Kueue takes whichever its cache lists first)."""
    return sorted(pods, key=_age_key)


def group_total_count(pod: Mapping[str, Any]) -> int:
    """The group's size as a member states it (``kueue.x-k8s.io/pod-group-total-count``, a positive integer:
    groupTotalCount); raises ManifestError naming the pod and the annotation."""
    return _total_count(_ref(pod))


PREBUILT_NOT_GROUP = "prebuilt workload and pod group should be equal"
"""Why a pod of a group may not name another prebuilt Workload (pod_webhook.go validatePrebuiltWorkloadName)."""


def check_prebuilt_group(pod: Mapping[str, Any]) -> None:
    """A pod of a group may name only its group as its prebuilt Workload (pod_webhook.go
    validatePrebuiltWorkloadName: the webhook refuses another at creation); raises ManifestError naming the field."""
    prebuilt, group = prebuilt_workload(pod), group_name(pod)
    if group and prebuilt and prebuilt != group:
        ref = _ref(pod)
        where = "annotations" if ref.annotations.get(workloads.PREBUILT_WORKLOAD_LABEL) else "labels"
        raise ref.error(field=f"metadata.{where}[{workloads.PREBUILT_WORKLOAD_LABEL}]", problem=PREBUILT_NOT_GROUP)


def is_serving(pod: Mapping[str, Any]) -> bool:
    """Whether the pod's group is a serving one (``kueue.x-k8s.io/pod-group-serving: "true"``): it never
    finishes, and its workload keeps its queue (pod_controller.go isServing, CustomQueueNameChange)."""
    return bool(group_name(pod)) and _ref(pod).annotations.get(SERVING_ANNOTATION) == "true"


def group_roles(pods: Sequence[Mapping[str, Any]], *, total: int) -> list[tuple[str, int]]:
    """The pod sets a group's pods make now, as ``(role hash, pods)`` sorted by role: its pods that are not
    Failed (nor deleted before they got a node) counted per role (constructGroupPodSets); with fast admission
    (the first pod's ``pod-group-fast-admission``) the first such pod's role counting ``total``
    (constructGroupPodSetsFast). ``pods`` oldest first; none such gives ``[]``. Raises MemberError naming a pod
    whose role cannot be computed."""
    runnable = [pod for pod in pods if _runnable_or_succeeded(pod)]
    if not runnable:
        return []
    if _ref(pods[0]).annotations.get(FAST_ADMISSION_ANNOTATION) == "true":
        return [(_role_of(runnable[0]), total)]
    counts: dict[str, int] = {}
    for pod in runnable:
        role = _role_of(pod)
        counts[role] = counts.get(role, 0) + 1
    return sorted(counts.items())


def _kept(active: Sequence[Mapping[str, Any]], total: int) -> Sequence[Mapping[str, Any]]:
    """The pods Kueue keeps when more can run than the group counts (sortActivePods: with the
    finalizer, ungated, older first; the rest are deleted)."""
    if len(active) <= total:
        return active

    def keep_first(pod: Mapping[str, Any]) -> tuple[bool, bool, int, str]:
        meta = pod.get("metadata") or {}
        return (POD_FINALIZER not in (meta.get("finalizers") or []), is_gated(pod), *_age_key(pod))

    return sorted(active, key=keep_first)[:total]


def _group_workload(
    ref: workloads.JobRef,
    pods: Sequence[Mapping[str, Any]],
    *,
    total: int,
    fast: bool,
    context: workloads.Context,
) -> models.Workload:
    roles: dict[str, tuple[Mapping[str, Any], int]] = {}
    for pod in pods[:1] if fast else pods:
        hash_ = _role_of(pod)
        template, count = roles.get(hash_, (pod, 0))
        roles[hash_] = (template, count + 1)
    if len(roles) > workloads.MAX_POD_SETS:
        raise ref.error(field="", problem=f"pod group can't include more than {workloads.MAX_POD_SETS} roles")
    pod_sets: list[models.PodSet] = []
    pod_specs = []
    for hash_ in sorted(roles):
        template, count = roles[hash_]
        member = _ref(template)
        pod_spec = _spec(member, template)
        try:
            pod_sets.append(
                workloads.pod_set(
                    member,
                    name=hash_,
                    count=total if fast else count,
                    pod_spec=pod_spec,
                    where="spec",
                    context=context,
                    topology_request=_topology_request(
                        member,
                        count=total if fast else count,
                        context=context,
                        pod_index_label=_group_index_label(template, hash_),
                    ),
                    index=len(pod_sets),
                )
            )
        except manifests.ManifestError as err:
            raise MemberError(template, err) from err
        pod_specs.append(("spec", pod_spec))
    previous = context.previous
    annotations = {IS_GROUP_WORKLOAD_ANNOTATION: "true"}
    # every pod owns Kueue's group Workload (EnsureWorkloadOwnedByAllMembers); the log's owner is the first only
    annotations[models.POD_GROUP_MEMBERS_ANNOTATION] = ",".join(sorted(_ref(p).name for p in pods))
    labels, marks = _parent_marks(pods[0], context)
    annotations.update(marks)
    workload = workloads.new_workload(
        ref,
        name=group_name(pods[0]),
        pod_sets=pod_sets,
        queue=_group_queue(ref, pods[0], context),
        pod_specs=pod_specs,
        context=context,
        owner=workloads.owner_of(ref),
        uid=previous.metadata.uid if previous is not None else ref.uid,
        creation_timestamp_ms=(
            previous.metadata.creation_timestamp_ms if previous is not None else max(_age_key(p)[0] for p in pods)
        ),
        annotations=annotations,
        job_uid_label=False,
    )
    if previous is None:
        copied_labels, copied_annotations = _copied_from_members(ref, _copy_sources(pods, context), context)
        labels = {**copied_labels, **labels}
        annotations = {**workload.metadata.annotations, **copied_annotations}
    else:
        annotations = dict(workload.metadata.annotations)
    if not labels and annotations == workload.metadata.annotations:
        return workload
    meta = msgspec.structs.replace(
        workload.metadata, labels={**workload.metadata.labels, **labels}, annotations=annotations
    )
    return msgspec.structs.replace(workload, metadata=meta)


def _copy_sources(pods: Sequence[Mapping[str, Any]], context: workloads.Context) -> Sequence[Mapping[str, Any]]:
    """What a new group Workload copies labels and annotations from: a StatefulSet's or LeaderWorkerSet's group
    its parent, as that parent's reconciler builds the Workload from it (statefulset_reconciler.go,
    leaderworkerset_reconciler.go: NewGroupWorkload of the parent); another group, or one whose parent is not in
    ``context.objects`` (yet), its pods."""
    first = pods[0]
    meta = workloads.as_mapping(first.get("metadata"))
    namespace = str(meta.get("namespace") or "default")
    if (sts := serving.statefulset_owner(first)) is not None:
        parent = context.objects.get("StatefulSet", {}).get((namespace, sts[0]))
        if parent is not None and str(workloads.as_mapping(parent.get("metadata")).get("uid") or "") == sts[1]:
            return [parent]
    elif serving.parent_framework(first) == serving.LWS_FRAMEWORK:
        lws_name = str(workloads.as_mapping(meta.get("labels")).get(serving.LWS_NAME_LABEL) or "")
        lws = context.objects.get("LeaderWorkerSet", {}).get((namespace, lws_name))
        if lws is not None and serving.lws_owner(first, lws) is not None:
            return [lws]
    return pods


def _copied_from_members(
    ref: workloads.JobRef, pods: Sequence[Mapping[str, Any]], context: workloads.Context
) -> tuple[dict[str, str], dict[str, str]]:
    """The labels and annotations a new group Workload copies (``context.label_keys_to_copy``,
    ``annotations_to_copy``) from any of ``pods`` (its pods, or its serving parent: :func:`_copy_sources`); two
    giving one key different values is an error naming the group, and no Workload is made
    (pod_controller.go ConstructComposableWorkload, getByKey: "pods have different label values";
    pod_controller_test.go "Pod controller with CustomMetricLabels")."""
    out: tuple[dict[str, str], dict[str, str]] = ({}, {})
    for pod in pods:
        meta = workloads.as_mapping(pod.get("metadata"))
        for what, keys, found in (
            ("label", context.label_keys_to_copy, out[0]),
            ("annotation", context.annotations_to_copy, out[1]),
        ):
            values = workloads.as_mapping(meta.get(f"{what}s"))
            for key in sorted(k for k in keys if k in values):
                if key in found and found[key] != str(values[key]):
                    raise ref.error(
                        field=f"metadata.{what}s[{key}]",
                        problem=f"constructing workload: pods have different {what} values",
                    )
                found[key] = str(values[key])
    return out


def _group_queue(ref: workloads.JobRef, first: Mapping[str, Any], context: workloads.Context) -> str:
    """The LocalQueue of a group's workload: a StatefulSet's group's is its StatefulSet's queue-name label while
    it has replicas (:func:`serving.statefulset_queue`, the StatefulSet read from ``context.objects["StatefulSet"]``
    by namespace and name, its UID the pod's controller's), a LeaderWorkerSet's group's its LeaderWorkerSet's
    (:func:`serving.lws_queue`, read from ``context.objects["LeaderWorkerSet"]``), as their reconcilers keep the
    Workloads they prebuild in their parent's LocalQueue; else, or with no label there, the first pod's (oldest,
    then by name)."""
    queue = ""
    if (owner := serving.statefulset_owner(first)) is not None:
        sts = context.objects.get("StatefulSet", {}).get((ref.namespace, owner[0]))
        if sts is not None and str(workloads.as_mapping(sts.get("metadata")).get("uid") or "") == owner[1]:
            queue = serving.statefulset_queue(sts)
    elif serving.parent_framework(first) == serving.LWS_FRAMEWORK:
        lws_name = str(ref.labels.get(serving.LWS_NAME_LABEL) or "")
        lws = context.objects.get("LeaderWorkerSet", {}).get((ref.namespace, lws_name))
        if lws is not None and serving.lws_owner(first, lws) is not None:
            queue = serving.lws_queue(lws)
    return queue or workloads.queue_name(ref, context, managed_without_queue=True) or ""


def _parent_marks(pod: Mapping[str, Any], context: workloads.Context) -> tuple[dict[str, str], dict[str, str]]:
    """The labels and annotations that make a serving group's Workload its parent's, as the Workload Kueue's
    StatefulSet or LeaderWorkerSet reconciler builds (:func:`serving.statefulset_workload_marks`,
    :func:`serving.lws_workload_marks`); empty for another group. The StatefulSet is the pod's controller; the
    LeaderWorkerSet is read from ``context.objects["LeaderWorkerSet"]`` (by namespace and name), and while it is
    not known the marks the group's workload had are kept."""
    if (sts := serving.statefulset_owner(pod)) is not None:
        return serving.statefulset_workload_marks(*sts)
    if serving.parent_framework(pod) != serving.LWS_FRAMEWORK:
        return {}, {}
    meta = workloads.as_mapping(pod.get("metadata"))
    lws_name = str(workloads.as_mapping(meta.get("labels")).get(serving.LWS_NAME_LABEL) or "")
    lws = context.objects.get("LeaderWorkerSet", {}).get((str(meta.get("namespace") or "default"), lws_name))
    if (owner := serving.lws_owner(pod, lws)) is not None:
        return serving.lws_workload_marks(*owner)
    previous = context.previous
    if previous is None or job_owners.serving_parent(previous) is None:
        return {}, {}
    keys = (
        job_owners.JOB_OWNER_GVK_ANNOTATION,
        job_owners.JOB_OWNER_NAME_ANNOTATION,
        job_owners.COMPONENT_INDEX_ANNOTATION,
    )
    kept = {k: v for k, v in previous.metadata.annotations.items() if k in keys}
    return {job_owners.JOB_UID_LABEL: previous.metadata.labels[job_owners.JOB_UID_LABEL]}, kept


def _role_of(pod: Mapping[str, Any]) -> str:
    """The role hash, or MemberError naming the pod when a quantity in its shape is bad."""
    try:
        return role_hash(pod)
    except quantities.QuantityError as err:
        member = _ref(pod)
        try:  # the pod set names the exact field of the bad quantity
            workloads.pod_set(member, name="main", count=1, pod_spec=_spec(member, pod), where="spec")
        except manifests.ManifestError as exact:
            raise MemberError(pod, exact) from err
        raise MemberError(pod, member.error(field="spec", problem=str(err))) from err


def parse_group_total_count(raw: str) -> int:
    """A pod group's ``kueue.x-k8s.io/pod-group-total-count`` as Kueue reads it (pod_controller.go
    groupTotalCount): Go's strconv.Atoi (64 bits), then at least 1; raises ValueError with Kueue's words, which
    its pod webhook puts in its Invalid error (``strconv.Atoi: parsing "x": invalid syntax``, ``... value out of
    range``, ``incorrect annotation value '...=0': group total count should be greater than zero``)."""
    value = goint.atoi(raw)
    if value < 1:
        raise ValueError(
            f"incorrect annotation value '{GROUP_TOTAL_COUNT_ANNOTATION}={raw}': group total count should be greater"
            " than zero"
        )
    return value


def _total_count(ref: workloads.JobRef) -> int:
    raw = ref.annotations.get(GROUP_TOTAL_COUNT_ANNOTATION)
    field = f"metadata.annotations[{GROUP_TOTAL_COUNT_ANNOTATION}]"
    if raw is None:
        problem = f"both the '{GROUP_TOTAL_COUNT_ANNOTATION}' annotation and the '{GROUP_NAME_KEY}' label should be set"
        raise ref.error(field=field, problem=problem)
    try:
        return parse_group_total_count(str(raw))
    except ValueError as err:
        raise ref.error(field=field, problem=str(err)) from err


def _check_group_name(ref: workloads.JobRef, name: str) -> None:
    if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        where = "annotations" if ref.annotations.get(GROUP_NAME_KEY) else "labels"
        raise ref.error(field=f"metadata.{where}[{GROUP_NAME_KEY}]", problem=f"{name!r} is not a valid workload name")


def finished_at_ms(pods: Sequence[Mapping[str, Any]]) -> int:
    """When the last of ``pods`` finished (ms since the epoch): the latest container ``finishedAt`` or
    condition transition in their status; 0 when the status has neither.

    A stable time, so a finished pod seen again gives the same WorkloadFinished.
    """
    times: list[Any] = []
    for pod in pods:
        status = workloads.as_mapping(pod.get("status"))
        for container in status.get("containerStatuses") or []:
            state = container.get("state") if isinstance(container, dict) else None
            terminated = state.get("terminated") if isinstance(state, dict) else None
            times.append(terminated.get("finishedAt") if isinstance(terminated, dict) else None)
        times.extend(c.get("lastTransitionTime") for c in status.get("conditions") or [] if isinstance(c, dict))
    parsed = []
    for value in times:
        if value is None:
            continue
        try:
            parsed.append(manifests.parse_time_ms(value))
        except manifests.ManifestError:
            continue
    return max(parsed, default=0)


def _runnable_or_succeeded(pod: Mapping[str, Any]) -> bool:
    """Not Failed, and not being deleted before it got a node (isPodRunnableOrSucceeded)."""
    meta = pod.get("metadata") or {}
    spec = workloads.as_mapping(pod.get("spec"))
    if meta.get("deletionTimestamp") and not spec.get("nodeName"):
        return False
    return _phase(pod) != "Failed"


def _phase(pod: Mapping[str, Any]) -> str:
    status = pod.get("status")
    return str(status.get("phase") or "") if isinstance(status, dict) else ""


def _age_key(pod: Mapping[str, Any]) -> tuple[int, str]:
    meta = workloads.as_mapping(pod.get("metadata"))
    try:
        created = manifests.parse_time_ms(meta.get("creationTimestamp"))
    except manifests.ManifestError:
        created = 0
    return created, str(meta.get("name") or "")


def _ref(pod: Mapping[str, Any]) -> workloads.JobRef:
    return workloads.job_ref(pod, kind="Pod", api_version=POD_API)


def _topology_request(
    ref: workloads.JobRef,
    *,
    count: int,
    context: workloads.Context,
    pod_index_label: str | None = POD_GROUP_POD_INDEX_LABEL,
) -> models.PodSetTopologyRequest | None:
    """The TAS request of a pod's own annotations, its rank hint ``pod_index_label`` (the pod group index label
    unless the group's maker names another: :func:`_group_index_label`); none with the gate
    TopologyAwareScheduling off (Kueue pod_controller.go constructPodSet)."""
    return workloads.topology_request(
        ref,
        ref.annotations,
        where="metadata.annotations",
        count=count,
        pod_index_label=pod_index_label,
        context=context,
    )


def _group_index_label(pod: Mapping[str, Any], role: str) -> str | None:
    """The label that ranks the pods of ``pod``'s role under TAS, as the maker of its group's Workload names it:
    for a StatefulSet's group its reconciler builds it from the StatefulSet, ranked by ``apps.kubernetes.io/
    pod-index`` (statefulset_reconciler.go constructWorkload); for a LeaderWorkerSet's group its workers by
    ``leaderworkerset.sigs.k8s.io/worker-index``, its leader by none (leaderworkerset_reconciler.go podSets); a
    plain group's by Kueue's own ``kueue.x-k8s.io/pod-group-pod-index`` (pod_controller.go constructPodSet)."""
    framework = serving.parent_framework(pod)
    if framework == serving.STATEFULSET_FRAMEWORK:
        return serving.STATEFULSET_POD_INDEX_LABEL
    if framework == serving.LWS_FRAMEWORK:
        return None if role == "leader" else serving.LWS_WORKER_INDEX_LABEL
    return POD_GROUP_POD_INDEX_LABEL


def _spec(ref: workloads.JobRef, pod: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        raise ref.error(field="spec", problem="must be a mapping (a pod spec)")
    return spec


# -- the role hash --------------------------------------------------------------------------------


def role_hash(pod: Mapping[str, Any]) -> str:
    """The pod's role: its ``kueue.x-k8s.io/role-hash`` annotation (Kueue's webhook writes it at creation),
    else, once started, the pod set its start put it in (its ``kueue.x-k8s.io/podset`` label: the start
    merges the flavor's node selector and tolerations into its spec, which would change the hash), else the
    first 8 hex digits of SHA-256 over the JSON of its spec's shape (GenerateRoleHash).

    The shape: containers and init containers (their requests and ports only),
    nodeSelector, affinity, tolerations, runtimeClassName, priority, topology spread
    constraints, overhead, resource claims, and pod-level requests when set. Kueue's
    own tests give ``dc85db45`` for one container requesting ``cpu: 1``.
    """
    ref = _ref(pod)
    annotation = ref.annotations.get(ROLE_HASH_ANNOTATION) or ref.labels.get(PODSET_LABEL)
    if annotation:
        return str(annotation)
    return _shape_hash(workloads.as_mapping(pod.get("spec")))


def spec_role_hash(spec: Any) -> str | None:
    """The role hash of a pod spec (a mapping; anything else counts as empty) as Kueue's pod webhook writes it
    into the ``kueue.x-k8s.io/role-hash`` annotation at creation (pod_webhook.go addRoleHash,
    pkg/util/pod GenerateRoleHash): 8 hex digits (:func:`role_hash`); None when a quantity in the shape is not
    one (the API server refuses such a pod)."""
    try:
        return _shape_hash(workloads.as_mapping(spec))
    except quantities.QuantityError:
        return None


def _shape_hash(spec: Mapping[str, Any]) -> str:
    text = _go_json({"spec": spec_shape(spec)})
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def spec_shape(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The admission-relevant part of a pod spec, keyed as Go sorts a map (pkg/util/pod SpecShape)."""
    shape: dict[str, Any] = {
        "affinity": _struct(spec.get("affinity")),
        "containers": _containers_shape(spec.get("containers")),
        "initContainers": _containers_shape(spec.get("initContainers")),
        "nodeSelector": _sorted_map(spec.get("nodeSelector")),
        "overhead": _resource_list(spec.get("overhead")),
        "priority": spec.get("priority"),
        "resourceClaims": _struct(spec.get("resourceClaims")),
        "runtimeClassName": spec.get("runtimeClassName"),
        "tolerations": _tolerations(spec.get("tolerations")),
        "topologySpreadConstraints": _struct(spec.get("topologySpreadConstraints")),
    }
    if spec.get("resources") is not None:
        resources = spec["resources"] if isinstance(spec["resources"], dict) else {}
        shape["resources"] = _resource_list(resources.get("requests"))
    return dict(sorted(shape.items()))


def _containers_shape(containers: Any) -> list[dict[str, Any]] | None:
    if not isinstance(containers, list) or not containers:
        return None
    out = []
    for container in containers:
        container = container if isinstance(container, dict) else {}
        resources = workloads.as_mapping(container.get("resources"))
        out.append(
            {
                "ports": _ports(container.get("ports")),
                "resources": {"requests": _resource_list(resources.get("requests"))},
            }
        )
    return out


def _ports(ports: Any) -> list[dict[str, Any]] | None:
    """ContainerPorts in Go's field order, empty fields left out (omitempty), as the API server writes them."""
    if not isinstance(ports, list) or not ports:
        return None
    keys = ("name", "hostPort", "containerPort", "protocol", "hostIP")
    out = []
    for port in ports:
        port = port if isinstance(port, dict) else {}
        out.append({k: port[k] for k in keys if k in port and (port[k] or k == "containerPort")})
    return out


def _tolerations(tolerations: Any) -> list[dict[str, Any]] | None:
    if not isinstance(tolerations, list) or not tolerations:
        return None
    keys = ("key", "operator", "value", "effect", "tolerationSeconds")
    return [{k: t[k] for k in keys if isinstance(t, dict) and t.get(k) not in (None, "")} for t in tolerations]


def _sorted_map(value: Any) -> dict[str, Any] | None:
    if not isinstance(value, dict) or not value:
        return None
    return {str(k): value[k] for k in sorted(value, key=str)}


def _resource_list(value: Any) -> dict[str, str] | None:
    """A ResourceList as Go writes it: sorted names, canonical quantities; empty is null (omitempty)."""
    if not isinstance(value, dict) or not value:
        return None
    return {str(k): quantities.canonical(value[k]) for k in sorted(value, key=str)}


def _struct(value: Any, *, key: str = "") -> Any:
    """An API struct as the API server sent it: key order kept (Go's field order), empty fields
    left out (omitempty); ``matchLabels`` maps sorted, as Go sorts every map."""
    if isinstance(value, dict):
        kept = {k: v for k, v in ((k, _struct(v, key=str(k))) for k, v in value.items()) if v not in (None, "", [], {})}
        return {k: kept[k] for k in sorted(kept)} if key == "matchLabels" else kept
    if isinstance(value, list):
        return [_struct(v) for v in value] or None
    return value


def _go_json(value: Any) -> str:
    """JSON as Go's encoding/json writes it: no spaces, keys in the order given, <, > and & escaped."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escaped)
    return text


# -- dynamic reclaim ------------------------------------------------------------------------------


def group_reclaimable_pods(members: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """A pod group's reclaimable pods: its Succeeded pods counted per role (pod set), ``{}`` for a
    serving group or none succeeded (Kueue pod_controller.go ReclaimablePods, isReclaimable). A pod
    whose role cannot be computed (a bad quantity: the conversion reports it) is not counted."""
    if any(_ref(p).annotations.get(SERVING_ANNOTATION) == "true" for p in members):
        return {}
    out: dict[str, int] = {}
    for pod in members:
        if _phase(pod) != "Succeeded":
            continue
        try:
            role = role_hash(pod)
        except quantities.QuantityError:
            continue
        out[role] = out.get(role, 0) + 1
    return out
