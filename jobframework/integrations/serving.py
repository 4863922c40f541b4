"""Deployment, StatefulSet (apps/v1) and LeaderWorkerSet (leaderworkerset.x-k8s.io/v1): kinds Kueue runs
through their pods.

Why this module exists: these serving kinds have no suspend field. Kueue's webhook
marks their pod templates instead (Kueue pkg/controller/jobs/deployment,
statefulset, leaderworkerset: ``*_webhook.go`` Default), the pods their controllers
create are gated by Kueue's pod webhook, and the pods are the workloads:

* Deployment: every pod is a plain-Pod workload of its own (pod set ``main`` of one pod);
  the template gets the ``kueue.x-k8s.io/pod-suspending-parent: deployment`` annotation,
  the ``kueue.x-k8s.io/managed`` label, and the queue-name and priority-class labels of
  the Deployment. Scaling out adds workloads, scaling in deletes pods and frees their quota.
* StatefulSet: one serving pod group for the set, named ``statefulset-<name>-<5 hex>``,
  with one pod set ``main`` counting ``replicas``; the template gets the
  ``pod-suspending-parent: statefulset`` annotation, and each pod the labels and
  annotations of :func:`pod_defaults` (Kueue statefulset_pod_reconciler.go setDefault):
  the group's name and total count, fast admission (pods come one by one), serving
  (never finished), role ``main``.
* LeaderWorkerSet: one serving pod group per LWS group (replica), named
  ``leaderworkerset-<name>-<group index>-<5 hex>``, with pod sets ``leader`` (1) and
  ``worker`` (size - 1), or ``main`` (size) without a leader template
  (leaderworkerset_reconciler.go podSets / setDefault).

Kueue writes the group labels on StatefulSet and LeaderWorkerSet pods from a controller
after they are created; :func:`pod_defaults` computes the same labels from the pod and
its parent so that the pod webhook (the emulator's create hook, the webhook server) can
add them at creation, which gives the pod integration the group at once.

The integrations here report no workload of their own (:func:`~kueue_es.jobframework.integrations.facts`
returns None for a kind with ``suspend_path`` None); ``pod_sets`` names the pod sets of the
workload(s) their pods make up, for the tests and the docs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from kueue_es.events import job_owners, manifests, models
from kueue_es.jobframework import workloads
from kueue_es.jobframework.annotations import SCHEDULING_GATE
from kueue_es.jobframework.integrations import Finished, Integration, PodSetSource

APPS_API = "apps/v1"
LWS_API = "leaderworkerset.x-k8s.io/v1"
DEPLOYMENT_FRAMEWORK = "deployment"
STATEFULSET_FRAMEWORK = "statefulset"
LWS_FRAMEWORK = "leaderworkerset.x-k8s.io/leaderworkerset"

#: The pod template annotation naming the framework whose pods Kueue's pod webhook gates
#: (pod constants SuspendedByParentAnnotation).
SUSPENDED_BY_PARENT_ANNOTATION = "kueue.x-k8s.io/pod-suspending-parent"
PREBUILT_WORKLOAD_LABEL = "kueue.x-k8s.io/prebuilt-workload-name"
POD_INDEX_LABEL_ANNOTATION = "kueue.x-k8s.io/pod-group-pod-index-label"
POD_INDEX_OFFSET_ANNOTATION = "kueue.x-k8s.io/pod-index-offset"
#: apps/v1 PodIndexLabel: a StatefulSet pod's ordinal.
STATEFULSET_POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"

# LeaderWorkerSet's own labels and annotations (sigs.k8s.io/lws api/leaderworkerset/v1).
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
LWS_GROUP_KEY_LABEL = "leaderworkerset.sigs.k8s.io/group-key"
LWS_SIZE_ANNOTATION = "leaderworkerset.sigs.k8s.io/size"
LWS_LEADER_NAME_ANNOTATION = "leaderworkerset.sigs.k8s.io/leader-name"

# The pod-group keys (kept here rather than imported from pods.py, which imports this package).
_GROUP_NAME = "kueue.x-k8s.io/pod-group-name"
_TOTAL_COUNT = "kueue.x-k8s.io/pod-group-total-count"
_FAST_ADMISSION = "kueue.x-k8s.io/pod-group-fast-admission"
_SERVING = "kueue.x-k8s.io/pod-group-serving"
_ROLE_HASH = "kueue.x-k8s.io/role-hash"


def _never_finished(_: Mapping[str, Any]) -> Finished | None:
    """Serving kinds never finish (a serving pod group is never finished: pod_controller.go Finished)."""
    return None


def _template_meta(obj: dict[str, Any], path: tuple[str, ...]) -> tuple[dict[str, str], dict[str, str]]:
    """The ``labels`` and ``annotations`` maps of the pod template at ``path`` (created when missing); detached
    empty maps when something on the way is not a mapping (a malformed object the API server refuses anyway),
    so defaulting never fails on it."""
    target: Any = obj
    for step in (*path, "metadata"):
        if not isinstance(target, dict):
            return {}, {}
        if target.get(step) is None:
            target[step] = {}
        target = target[step]
    if not isinstance(target, dict):
        return {}, {}
    meta = target
    labels = meta.get("labels")
    if not isinstance(labels, dict):
        labels = meta["labels"] = {}
    annotations = meta.get("annotations")
    if not isinstance(annotations, dict):
        annotations = meta["annotations"] = {}
    return labels, annotations


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return workloads.as_mapping(workloads.as_mapping(obj.get("metadata")).get("labels"))


def _copy_queue_and_priority(obj: Mapping[str, Any], labels: dict[str, str]) -> None:
    """The object's queue-name and priority-class labels onto a template's labels (QueueNameForObject,
    WorkloadPriorityClassName)."""
    for key in (workloads.QUEUE_LABEL, workloads.PRIORITY_CLASS_LABEL):
        value = _labels(obj).get(key)
        if value:
            labels[key] = str(value)


# -- Deployment -----------------------------------------------------------------------------------


def deployment_on_create(deployment: dict[str, Any]) -> None:
    """Kueue deployment_webhook.go Default for a managed Deployment: its template gets the suspending-parent
    annotation, the managed label, and the Deployment's queue-name and priority-class labels (in place)."""
    labels, annotations = _template_meta(deployment, ("spec", "template"))
    annotations[SUSPENDED_BY_PARENT_ANNOTATION] = DEPLOYMENT_FRAMEWORK
    labels[workloads.MANAGED_LABEL] = "true"
    _copy_queue_and_priority(deployment, labels)


def deployment_pod_sets(ref: workloads.JobRef, deployment: Mapping[str, Any]) -> list[PodSetSource]:
    """The pod set of each of a Deployment's pod workloads: ``main`` of one pod (a plain Pod's)."""
    _template(ref, deployment, ("spec", "template"))
    return [PodSetSource(name="main", count=1, template_path=("spec", "template"))]


# -- StatefulSet ----------------------------------------------------------------------------------


def statefulset_managed_by_other(sts: Mapping[str, Any]) -> bool:
    """A StatefulSet whose template another framework marked (a LeaderWorkerSet's): Kueue's StatefulSet
    integration leaves it alone (statefulset_controller.go managedByAnotherFramework)."""
    template = workloads.as_mapping(workloads.as_mapping(sts.get("spec")).get("template"))
    parent = workloads.as_mapping(workloads.as_mapping(template.get("metadata")).get("annotations")).get(
        SUSPENDED_BY_PARENT_ANNOTATION
    )
    return bool(parent) and parent != STATEFULSET_FRAMEWORK


def statefulset_on_create(sts: dict[str, Any]) -> None:
    """Kueue statefulset_webhook.go Default: the template gets the suspending-parent annotation, unless
    another framework (a LeaderWorkerSet) manages the StatefulSet (in place)."""
    if statefulset_managed_by_other(sts):
        return
    _, annotations = _template_meta(sts, ("spec", "template"))
    annotations[SUSPENDED_BY_PARENT_ANNOTATION] = STATEFULSET_FRAMEWORK


def statefulset_replicas(ref: workloads.JobRef, sts: Mapping[str, Any]) -> int:
    """``spec.replicas`` (default 1); raises ManifestError naming the field when it is not a count."""
    return workloads.count_field(
        ref, workloads.as_mapping(sts.get("spec")).get("replicas"), field="spec.replicas", default=1
    )


def statefulset_pod_sets(ref: workloads.JobRef, sts: Mapping[str, Any]) -> list[PodSetSource]:
    """The StatefulSet's workload: one pod set ``main`` counting ``replicas`` (statefulset_reconciler.go
    constructWorkload), TAS rank by the pod's ``apps.kubernetes.io/pod-index`` label."""
    _template(ref, sts, ("spec", "template"))
    return [
        PodSetSource(
            name="main",
            count=statefulset_replicas(ref, sts),
            template_path=("spec", "template"),
            pod_index_label=STATEFULSET_POD_INDEX_LABEL,
        )
    ]


def statefulset_workload_name(name: str, uid: str) -> str:
    """``statefulset-<name>-<5 hex>`` (statefulset GetWorkloadName): the name of its pod group."""
    return workloads.workload_name(owner_name=name, owner_uid=uid, kind="StatefulSet", group="apps")


JOB_OWNER_GVK_ANNOTATION = job_owners.JOB_OWNER_GVK_ANNOTATION
JOB_OWNER_NAME_ANNOTATION = job_owners.JOB_OWNER_NAME_ANNOTATION
STATEFULSET_GVK = job_owners.gvk_string(APPS_API, "StatefulSet")
LWS_GVK = job_owners.gvk_string(LWS_API, "LeaderWorkerSet")


def statefulset_owner(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """The StatefulSet whose serving group the pod is in, as ``(name, uid)``: its controller owner reference when
    that is an apps/v1 StatefulSet and the pod's template carries the ``statefulset`` suspending-parent mark; None
    otherwise (a LeaderWorkerSet's pods are a StatefulSet's too, but marked by their LWS)."""
    if parent_framework(pod) != STATEFULSET_FRAMEWORK:
        return None
    refs = workloads.as_mapping(pod.get("metadata")).get("ownerReferences")
    for ref in refs if isinstance(refs, list) else []:
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            if ref.get("apiVersion") == APPS_API and ref.get("kind") == "StatefulSet" and ref.get("uid"):
                return str(ref.get("name") or ""), str(ref["uid"])
            return None
    return None


def lws_owner(pod: Mapping[str, Any], lws: Mapping[str, Any] | None) -> tuple[str, str, str] | None:
    """The LeaderWorkerSet whose group the pod is in, as ``(name, uid, group index)``: ``lws`` (the LeaderWorkerSet
    the pod's ``leaderworkerset.sigs.k8s.io/name`` label names, as the API server has it; None when not found) when
    the pod carries the ``leaderworkerset.x-k8s.io/leaderworkerset`` suspending-parent mark and its group name is
    that LeaderWorkerSet's for its group index (so a LeaderWorkerSet made again under the same name is not taken
    for the one the group was made for); None otherwise."""
    if lws is None or parent_framework(pod) != LWS_FRAMEWORK:
        return None
    meta = workloads.as_mapping(pod.get("metadata"))
    labels = workloads.as_mapping(meta.get("labels"))
    lws_meta = workloads.as_mapping(lws.get("metadata"))
    name, uid, index = (
        str(lws_meta.get("name") or ""),
        str(lws_meta.get("uid") or ""),
        labels.get(LWS_GROUP_INDEX_LABEL),
    )
    if not name or not uid or index is None or labels.get(LWS_NAME_LABEL) != name:
        return None
    annotations = workloads.as_mapping(meta.get("annotations"))
    # the group name is the annotation pod_defaults writes, or the label it wrote before (and Kueue without
    # WorkloadIdentifierAnnotations writes): pkg/util/pod/pod.go GetPodGroupName
    group = annotations.get(_GROUP_NAME) or labels.get(_GROUP_NAME)
    if group != lws_workload_name(name, uid, str(index)):
        return None
    return name, uid, str(index)


def statefulset_workload_marks(name: str, uid: str) -> tuple[dict[str, str], dict[str, str]]:
    """The labels and annotations Kueue's StatefulSet reconciler gives the Workload it prebuilds for StatefulSet
    ``name`` (statefulset_reconciler.go constructWorkload): ``kueue.x-k8s.io/job-uid`` (its UID), and
    :data:`JOB_OWNER_GVK_ANNOTATION` / :data:`JOB_OWNER_NAME_ANNOTATION`. The dispatcher reads them back as the
    StatefulSet's owner reference on the Workload object (:func:`parent_owner_reference`)."""
    return {workloads.JOB_UID_LABEL: uid}, {JOB_OWNER_GVK_ANNOTATION: STATEFULSET_GVK, JOB_OWNER_NAME_ANNOTATION: name}


def lws_queue(lws: Mapping[str, Any]) -> str:
    """The LocalQueue the LeaderWorkerSet's groups' Workloads are in: its ``kueue.x-k8s.io/queue-name`` label (""
    without one: the Workloads keep theirs). Kueue's LeaderWorkerSet reconciler (leaderworkerset_reconciler.go
    updateWorkload) sets each group Workload's ``spec.queueName`` to it, so a label changed while no replica is
    ready (leaderworkerset_webhook.go ValidateUpdate) moves the groups' Workloads."""
    return str(_labels(lws).get(workloads.QUEUE_LABEL) or "")


def lws_workload_marks(name: str, uid: str, index: str) -> tuple[dict[str, str], dict[str, str]]:
    """The labels and annotations Kueue's LeaderWorkerSet reconciler gives the Workload it makes for group
    ``index`` of LeaderWorkerSet ``name`` (leaderworkerset_reconciler.go constructWorkload): ``kueue.x-k8s.io/
    job-uid`` (its UID), :data:`JOB_OWNER_GVK_ANNOTATION` / :data:`JOB_OWNER_NAME_ANNOTATION`, and the group's
    ``kueue.x-k8s.io/component-workload-index``. Read back as the LeaderWorkerSet's owner reference
    (:func:`parent_owner_reference`)."""
    annotations = {
        JOB_OWNER_GVK_ANNOTATION: LWS_GVK,
        JOB_OWNER_NAME_ANNOTATION: name,
        job_owners.COMPONENT_INDEX_ANNOTATION: index,
    }
    return {workloads.JOB_UID_LABEL: uid}, annotations


def parent_owner_reference(workload: models.Workload) -> dict[str, Any] | None:
    """The owner reference to its StatefulSet or LeaderWorkerSet that Kueue puts on a serving group's Workload
    (controllerutil SetOwnerReference in both reconcilers' constructWorkload, and the StatefulSet's
    reconcileWorkload: ``apiVersion``, ``kind``, ``name``, ``uid``; not the controller, no
    ``blockOwnerDeletion``), so that the garbage collector keeps the Workload while its pods are gone (a
    StatefulSet scaled to zero, a LeaderWorkerSet group whose pods are all made again) and deletes it with its
    parent; read from :func:`statefulset_workload_marks` / :func:`lws_workload_marks`
    (:func:`~kueue_es.events.job_owners.serving_parent`). None for another workload."""
    parent = job_owners.serving_parent(workload)
    if parent is None:
        return None
    return {"apiVersion": parent.api_version, "kind": parent.kind, "name": parent.name, "uid": parent.uid}


def parent_wants_group(workload: models.Workload, parent: Mapping[str, Any] | None) -> bool:
    """Whether a serving group's Workload stays with every pod of its group gone, because the StatefulSet or
    LeaderWorkerSet it was made for still wants the group, as Kueue's does: that parent owns it (an owner
    reference set by its reconciler's constructWorkload), so the garbage collector keeps it while the parent is
    there, and the pod reconciler only finalizes the pods of a group it finds empty (pod_controller.go Load).

    ``workload``: the group's workload, whose marks (:func:`~kueue_es.events.job_owners.serving_parent`) name
    its parent; ``parent``: the object of that kind and name in the Workload's namespace as the API server has
    it, None when there is none. True while ``parent`` is the one the marks name (the same UID: one made again
    under the name does not own it), not being deleted, and wants the group: a StatefulSet with
    ``spec.replicas`` above zero (default 1; scaled to zero its Workload is held instead:
    :func:`statefulset_hold`), a LeaderWorkerSet whose ``spec.replicas`` (default 1) counts past the group's
    ``kueue.x-k8s.io/component-workload-index`` (leaderworkerset_reconciler.go filterWorkloads deletes the
    Workloads of the groups past it). False for a Workload with no serving parent and for a replica count that
    is not a number (the parent's own rejection says why)."""
    marked = job_owners.serving_parent(workload)
    if marked is None or parent is None:
        return False
    meta = workloads.as_mapping(parent.get("metadata"))
    if parent.get("kind") not in (None, marked.kind) or meta.get("uid") != marked.uid or meta.get("deletionTimestamp"):
        return False
    raw = workloads.as_mapping(parent.get("spec")).get("replicas")
    replicas = 1 if raw is None else workloads.parse_int(raw)
    if replicas is None:
        return False
    if marked.kind == "StatefulSet":
        return replicas > 0
    index = workloads.parse_int(workload.metadata.annotations.get(job_owners.COMPONENT_INDEX_ANNOTATION))
    return index is not None and 0 <= index < replicas


#: apps/v1 ControllerRevisionHashLabelKey: the revision of its StatefulSet a pod was made from.
REVISION_LABEL = "controller-revision-hash"
#: The scheduling gates Kueue takes off a StatefulSet's current-revision pod during a rollout (pod constants
#: SchedulingGateName and kueue TopologySchedulingGate; util/statefulset UngatePod).
ROLLOUT_UNGATED = (SCHEDULING_GATE, "kueue.x-k8s.io/topology")


def statefulset_revisions(sts: Mapping[str, Any]) -> tuple[str, str]:
    """``(status.currentRevision, status.updateRevision)`` of a StatefulSet, "" for one not reported."""
    status = workloads.as_mapping(sts.get("status"))
    return str(status.get("currentRevision") or ""), str(status.get("updateRevision") or "")


def rollout_statefulset(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """The StatefulSet whose rollout may ungate the pod (:func:`rollout_ungates`), as ``(name, uid)``: its
    controller owner reference when that is an apps/v1 StatefulSet and the pod's template carries the
    ``statefulset`` or the ``leaderworkerset.x-k8s.io/leaderworkerset`` suspending-parent mark (a LeaderWorkerSet's
    pods are its leader or worker StatefulSet's: leaderworkerset_reconciler.go reconcilePod applies the same rule
    with the pod's controlling StatefulSet); None otherwise."""
    if parent_framework(pod) not in (STATEFULSET_FRAMEWORK, LWS_FRAMEWORK):
        return None
    owner = workloads.controller_owner(workloads.as_mapping(pod.get("metadata")))
    if owner is None or owner.get("apiVersion") != APPS_API or owner.get("kind") != "StatefulSet":
        return None
    if not owner.get("uid"):
        return None
    return str(owner.get("name") or ""), str(owner["uid"])


def rollout_ungates(revisions: tuple[str, str], pod: Mapping[str, Any]) -> list[str]:
    """The Kueue scheduling gates to take off a StatefulSet's pod because of its rollout, [] for none.

    ``revisions``: its StatefulSet's ``(currentRevision, updateRevision)`` (:func:`statefulset_revisions`);
    ``pod``: a pod whose controller is that StatefulSet (:func:`rollout_statefulset`). Kueue util/statefulset
    statefulset.go ShouldUngatePod and UngatePod, run by the StatefulSet reconciler (statefulset_reconciler.go
    ungatePod) on each pod of its group and by the LeaderWorkerSet reconciler (reconcilePod) on each of its pods: while a rollout is under way (the two revisions differ), a pod of the *current* revision -- one the
    rollout is about to replace, made again at an ordinal below the partition or left gated from before the
    update -- loses both the admission and the topology gate whatever its Workload's admission, so that an
    OrderedReady rollout is not stuck behind a gated old pod; a pod of the update revision keeps its gates
    until its Workload admits it. Its finalizer is not touched. Only the gates the pod carries are named.
    """
    current, update = revisions
    labels = workloads.as_mapping(workloads.as_mapping(pod.get("metadata")).get("labels"))
    if not current or current == update or labels.get(REVISION_LABEL) != current:
        return []
    gates = workloads.as_mapping(pod.get("spec")).get("schedulingGates")
    names = {g.get("name") for g in gates if isinstance(g, Mapping)} if isinstance(gates, list) else set()
    return [gate for gate in ROLLOUT_UNGATED if gate in names]


STATEFULSET_ON_HOLD_MESSAGE = "StatefulSet scaled to zero; workload on hold"
"""Kueue's QuotaReserved message for the Workload of a StatefulSet scaled to zero (statefulset_reconciler.go
releaseScaleDownReservation)."""


def statefulset_hold(sts: Mapping[str, Any]) -> str:
    """Why the StatefulSet's Workload is on hold: :data:`STATEFULSET_ON_HOLD_MESSAGE` while ``spec.replicas`` is 0,
    "" otherwise (Kueue statefulset_reconciler.go reconcileWorkload: scaled to zero, the Workload keeps its owner
    and its reservation is released with reason OnHold; scaled up, the hold is cleared). A StatefulSet being
    deleted holds nothing: its Workload goes with it. Raises ManifestError naming ``spec.replicas`` when it is
    not a count."""
    if workloads.as_mapping(sts.get("metadata")).get("deletionTimestamp"):
        return ""
    ref = workloads.job_ref(sts, kind="StatefulSet", api_version=APPS_API)
    return STATEFULSET_ON_HOLD_MESSAGE if statefulset_replicas(ref, sts) == 0 else ""


def statefulset_queue(sts: Mapping[str, Any]) -> str:
    """The LocalQueue the StatefulSet's group Workload is in: its ``kueue.x-k8s.io/queue-name`` label while
    ``spec.replicas`` is above zero, "" when it leaves the Workload's queue as it is (scaled to zero, no label, or
    a ``spec.replicas`` that is not a count, left to the StatefulSet's own rejection).

    Kueue's StatefulSet reconciler (statefulset_reconciler.go reconcileWorkload) sets the Workload's
    ``spec.queueName`` to the StatefulSet's label whenever ``replicas > 0``, and syncQueueLabel writes it on the
    group's pods: a label changed while the webhook allows it (no replica ready, statefulset_webhook.go
    ValidateUpdate) moves the Workload to that LocalQueue. The pods' own labels are not what the Workload
    follows (its is a prebuilt Workload, never built from them)."""
    queue = str(_labels(sts).get(workloads.QUEUE_LABEL) or "")
    ref = workloads.job_ref(sts, kind="StatefulSet", api_version=APPS_API)
    try:
        replicas = statefulset_replicas(ref, sts)
    except manifests.ManifestError:  # not a count: left to the StatefulSet's own rejection
        return ""
    return queue if replicas > 0 else ""


def statefulset_requeued(workload: models.Workload, sts: Mapping[str, Any]) -> models.Workload:
    """``workload`` (the StatefulSet's group workload) in the LocalQueue :func:`statefulset_queue` names, or as
    it is when that is "" or the same."""
    queue = statefulset_queue(sts)
    if not queue or queue == workload.spec.queue_name:
        return workload
    return msgspec.structs.replace(workload, spec=msgspec.structs.replace(workload.spec, queue_name=queue))


def queue_relabels(workload: models.Workload, members: Sequence[Mapping[str, Any]], *, queue: str) -> list[str]:
    """The names of the pods of a StatefulSet's or LeaderWorkerSet's group (``members``, as listed; ``workload`` its
    Workload, whose marks name the parent) whose ``kueue.x-k8s.io/queue-name`` label is to become ``queue``, the
    LocalQueue its parent names (:func:`statefulset_queue`, :func:`lws_queue`). Kueue's StatefulSet reconciler
    (statefulset_reconciler.go syncQueueLabel, statefulset_pod_reconciler.go setDefault) and LeaderWorkerSet
    reconciler (leaderworkerset_reconciler.go setDefault) relabel them, the pod webhook refusing the change on a
    pod no longer gated: so only gated pods, not being deleted, sorted by name. None for another Workload, nor
    for ``queue`` ""."""
    if job_owners.serving_parent(workload) is None or not queue:
        return []
    out = []
    for pod in members:
        meta = workloads.as_mapping(pod.get("metadata"))
        labels = workloads.as_mapping(meta.get("labels"))
        spec = workloads.as_mapping(pod.get("spec"))
        gated = any(
            isinstance(g, Mapping) and g.get("name") == SCHEDULING_GATE for g in spec.get("schedulingGates") or []
        )
        if gated and not meta.get("deletionTimestamp") and labels.get(workloads.QUEUE_LABEL) != queue:
            out.append(str(meta.get("name") or ""))
    return sorted(out)


def statefulset_resized(workload: models.Workload, sts: Mapping[str, Any]) -> models.Workload:
    """``workload`` (the StatefulSet's held group workload) with its pod set counting the StatefulSet's
    ``spec.replicas`` now, as Kueue's StatefulSet reconciler resizes the Workload on hold before it lets it go
    when the StatefulSet is scaled up from zero to another size (statefulset_reconciler.go, PR #15279: "left the
    Workload with the original pod count, causing it to be admitted and charged quota for the wrong number of
    pods"). The workload itself when the count is the same or it has not one pod set (a StatefulSet's has
    ``main``). Raises ManifestError naming ``spec.replicas`` when it is not a count."""
    ref = workloads.job_ref(sts, kind="StatefulSet", api_version=APPS_API)
    replicas = statefulset_replicas(ref, sts)
    pod_sets = workload.spec.pod_sets
    if len(pod_sets) != 1 or pod_sets[0].count == replicas:
        return workload
    resized = msgspec.structs.replace(pod_sets[0], count=replicas)
    spec = msgspec.structs.replace(workload.spec, pod_sets=[resized])
    return msgspec.structs.replace(workload, spec=spec)


# -- LeaderWorkerSet ------------------------------------------------------------------------------


def lws_on_create(lws: dict[str, Any]) -> None:
    """Kueue leaderworkerset_webhook.go Default: the leader (if any) and worker templates get the LWS's
    queue-name and priority-class labels, the suspending-parent and serving annotations; with a leader,
    the worker template counts its TAS ranks from 1 unless it is in a pod set group (in place)."""
    template = workloads.as_mapping(workloads.as_mapping(lws.get("spec")).get("leaderWorkerTemplate"))
    has_leader = isinstance(template.get("leaderTemplate"), dict)
    paths = [("leaderTemplate", False)] if has_leader else []
    for name, is_worker in [*paths, ("workerTemplate", True)]:
        labels, annotations = _template_meta(lws, ("spec", "leaderWorkerTemplate", name))
        _copy_queue_and_priority(lws, labels)
        annotations[SUSPENDED_BY_PARENT_ANNOTATION] = LWS_FRAMEWORK
        annotations[_SERVING] = "true"
        if is_worker and has_leader and "kueue.x-k8s.io/podset-group-name" not in annotations:
            annotations[POD_INDEX_OFFSET_ANNOTATION] = "1"


def lws_size(ref: workloads.JobRef, lws: Mapping[str, Any]) -> int:
    """``spec.leaderWorkerTemplate.size`` (default 1): pods per group."""
    template = workloads.as_mapping(workloads.as_mapping(lws.get("spec")).get("leaderWorkerTemplate"))
    size = workloads.count_field(ref, template.get("size"), field="spec.leaderWorkerTemplate.size", default=1)
    if size < 1:
        raise ref.error(field="spec.leaderWorkerTemplate.size", problem="must be at least 1")
    return size


def lws_pod_sets(ref: workloads.JobRef, lws: Mapping[str, Any]) -> list[PodSetSource]:
    """The pod sets of each group's workload (leaderworkerset_reconciler.go podSets): ``leader`` (1) and
    ``worker`` (size - 1), or ``main`` (size) without a leader template; the workers rank by
    ``leaderworkerset.sigs.k8s.io/worker-index``. Raises ManifestError naming the field."""
    spec = workloads.as_mapping(lws.get("spec"))
    template = spec.get("leaderWorkerTemplate")
    if not isinstance(template, dict):
        raise ref.error(field="spec.leaderWorkerTemplate", problem="is required")
    size = lws_size(ref, lws)
    base = ("spec", "leaderWorkerTemplate")
    _template(ref, lws, (*base, "workerTemplate"))
    if template.get("leaderTemplate") is None:
        return [
            PodSetSource(
                name="main",
                count=size,
                template_path=(*base, "workerTemplate"),
                pod_index_label=LWS_WORKER_INDEX_LABEL,
            )
        ]
    _template(ref, lws, (*base, "leaderTemplate"))
    return [
        PodSetSource(name="leader", count=1, template_path=(*base, "leaderTemplate")),
        PodSetSource(
            name="worker",
            count=size - 1,
            template_path=(*base, "workerTemplate"),
            pod_index_label=LWS_WORKER_INDEX_LABEL,
        ),
    ]


def lws_workload_name(name: str, uid: str, group_index: str) -> str:
    """``leaderworkerset-<name>-<group index>-<5 hex>`` (leaderworkerset GetWorkloadName)."""
    return workloads.workload_name(
        owner_name=f"{name}-{group_index}", owner_uid=uid, kind="LeaderWorkerSet", group="leaderworkerset.x-k8s.io"
    )


# -- the pods' group labels -----------------------------------------------------------------------


def parent_framework(pod: Mapping[str, Any]) -> str:
    """The framework that suspends the pod through its template (its suspending-parent annotation), or ""."""
    meta = workloads.as_mapping(pod.get("metadata"))
    return str(workloads.as_mapping(meta.get("annotations")).get(SUSPENDED_BY_PARENT_ANNOTATION) or "")


def pod_defaults(
    pod: dict[str, Any], parent: Mapping[str, Any] | None, *, manage_jobs_without_queue_name: bool = False
) -> bool:
    """Give a StatefulSet's or LeaderWorkerSet's pod the labels and annotations that make it a member of
    its parent's serving pod group, in place; True when the pod is managed (changed), False when left alone.

    ``parent``: the pod's StatefulSet (its controller) or LeaderWorkerSet (named by the pod's
    ``leaderworkerset.sigs.k8s.io/name`` label), as the API server has it; None when it is not found.
    Kueue statefulset_pod_reconciler.go setDefault: the managed, queue-name and priority-class labels,
    group name and prebuilt-workload name ``statefulset-<name>-<hash>``, total count ``replicas``, fast
    admission, serving, TAS index label ``apps.kubernetes.io/pod-index``, role ``main``.
    leaderworkerset_reconciler.go setDefault: the same with the group ``leaderworkerset-<name>-<index>-<hash>``,
    total count ``size``, role ``leader`` (no leader-name annotation) or ``worker``, or ``main``
    without a leader template; it waits for the pod's group-index label (False without one).

    The queue-name label is written only when the parent has one. A StatefulSet without it is managed only with
    ``manage_jobs_without_queue_name`` (Kueue's option; statefulset_pod_reconciler.go setDefault returns early
    otherwise, Kueue #5714); a LeaderWorkerSet's pods always are, as leaderworkerset_reconciler.go setDefault
    never asks (its webhook marked the templates only for a LeaderWorkerSet Kueue manages, the queue-name label
    or that option, Kueue #4808). Their group's Workload then names no LocalQueue and waits, until the parent is
    labelled (:func:`statefulset_queue`, :func:`lws_queue`).
    """
    framework = parent_framework(pod)
    if parent is None or framework not in (STATEFULSET_FRAMEWORK, LWS_FRAMEWORK):
        return False
    queue = str(_labels(parent).get(workloads.QUEUE_LABEL) or "")
    if not queue and framework == STATEFULSET_FRAMEWORK and not manage_jobs_without_queue_name:
        return False
    parent_meta = workloads.as_mapping(parent.get("metadata"))
    name, uid = str(parent_meta.get("name") or ""), str(parent_meta.get("uid") or "")
    ref = workloads.job_ref(parent, kind=str(parent.get("kind") or ""), api_version=str(parent.get("apiVersion") or ""))
    meta = pod.setdefault("metadata", {})
    labels = meta.setdefault("labels", {})
    annotations = meta.setdefault("annotations", {})
    if framework == STATEFULSET_FRAMEWORK:
        group = statefulset_workload_name(name, uid)
        total = statefulset_replicas(ref, parent)
        role = "main"
        annotations[_FAST_ADMISSION] = "true"
        annotations[_SERVING] = "true"
        annotations[POD_INDEX_LABEL_ANNOTATION] = STATEFULSET_POD_INDEX_LABEL
    else:
        index = labels.get(LWS_GROUP_INDEX_LABEL)
        if index is None:
            return False
        group = lws_workload_name(name, uid, str(index))
        total = lws_size(ref, parent)
        has_leader = isinstance(
            workloads.as_mapping(workloads.as_mapping(parent.get("spec")).get("leaderWorkerTemplate")).get(
                "leaderTemplate"
            ),
            dict,
        )
        role = ("worker" if LWS_LEADER_NAME_ANNOTATION in annotations else "leader") if has_leader else "main"
    labels[workloads.MANAGED_LABEL] = "true"
    if queue:
        labels[workloads.QUEUE_LABEL] = queue
    priority = _labels(parent).get(workloads.PRIORITY_CLASS_LABEL)
    if priority:
        labels[workloads.PRIORITY_CLASS_LABEL] = str(priority)
    # annotations, not labels, as Kueue writes them with WorkloadIdentifierAnnotations (beta, on by default;
    # pod_controller.go SetPodGroupName, jobframework/utils.go SetPrebuiltWorkloadName): a long parent name
    # makes a group name longer than a label value may be (63 characters)
    annotations[_GROUP_NAME] = group
    annotations[PREBUILT_WORKLOAD_LABEL] = group
    annotations[_TOTAL_COUNT] = str(total)
    annotations[_ROLE_HASH] = role
    return True


def parent_of(pod: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """``(apiVersion, kind, name)`` of the object :func:`pod_defaults` needs for this pod, in its namespace:
    the controlling StatefulSet of a ``statefulset`` pod, the LeaderWorkerSet its label names for a
    ``leaderworkerset.x-k8s.io/leaderworkerset`` pod; None for other pods."""
    framework = parent_framework(pod)
    meta = workloads.as_mapping(pod.get("metadata"))
    if framework == STATEFULSET_FRAMEWORK:
        owner = workloads.controller_owner(meta)
        if owner is not None and owner.get("apiVersion") == APPS_API and owner.get("kind") == "StatefulSet":
            return APPS_API, "StatefulSet", str(owner.get("name") or "")
        return None
    if framework == LWS_FRAMEWORK:
        name = workloads.as_mapping(meta.get("labels")).get(LWS_NAME_LABEL)
        return (LWS_API, "LeaderWorkerSet", str(name)) if name else None
    return None


def _template(ref: workloads.JobRef, obj: Mapping[str, Any], path: tuple[str, ...]) -> Mapping[str, Any]:
    """The pod template at ``path``, or ManifestError naming it when it is not a mapping with a pod spec."""
    target: Any = obj
    for step in path:
        target = target.get(step) if isinstance(target, dict) else None
    where = ".".join(path)
    if not isinstance(target, dict):
        raise ref.error(field=where, problem="is required (a pod template)")
    if not isinstance(target.get("spec"), dict):
        raise ref.error(field=f"{where}.spec", problem="is required (a pod spec)")
    return target


INTEGRATIONS = (
    Integration(
        framework=DEPLOYMENT_FRAMEWORK,
        api_version=APPS_API,
        kind="Deployment",
        plural="deployments",
        suspend_path=None,
        pod_sets=deployment_pod_sets,
        finished=_never_finished,
        on_create=deployment_on_create,
    ),
    Integration(
        framework=STATEFULSET_FRAMEWORK,
        api_version=APPS_API,
        kind="StatefulSet",
        plural="statefulsets",
        suspend_path=None,
        pod_sets=statefulset_pod_sets,
        finished=_never_finished,
        on_create=statefulset_on_create,
    ),
    Integration(
        framework=LWS_FRAMEWORK,
        api_version=LWS_API,
        kind="LeaderWorkerSet",
        plural="leaderworkersets",
        suspend_path=None,
        pod_sets=lws_pod_sets,
        finished=_never_finished,
        on_create=lws_on_create,
    ),
)
