"""A job's prebuilt Workload: adopted, not made for it (Kueue jobframework/reconciler.go ensureOneWorkload).

Why this module exists: a job that names a Workload in ``kueue.x-k8s.io/prebuilt-workload-name``
(annotation first, then label: :func:`~kueue_es.jobframework.workloads.prebuilt_workload`) gets no
Workload of its own; it uses that one, which someone made before it (MultiKueue's copy on a worker,
a user, another controller). Kueue's job reconciler, for such a job:

- waits while the Workload does not exist, the job kept suspended (handleJobWithNoWorkload:
  ``ErrPrebuiltWorkloadNotFound``, tried again);
- leaves a Workload another object controls alone: the job waits (ensureOneWorkload);
- makes the job the Workload's controller owner and labels it ``kueue.x-k8s.io/job-uid``
  (EnsurePrebuiltWorkloadOwnership), before anything else;
- finishes a Workload that does not match the job with reason ``OutOfSync`` ("The prebuilt workload
  is out of sync with its user job": ensurePrebuiltWorkloadInSync, EquivalentToWorkload); the job
  then has no workload and waits;
- moves a Workload that holds no quota to the job's LocalQueue (QueueNameChange);
- and from then on treats it as the job's own: started when admitted (also when it was admitted before
  the job came), stopped when evicted, finished when the job finishes.

Pods name one too (pod_controller.go, the pod being a ComposableJob): a single pod as any job (its
controller owner, compared as a job is); a pod group only by its own name (the pod webhook refuses
another), adopted as soon as one of its pods is there, complete or not, with each pod a
non-controller owner (EnsureWorkloadOwnedByAllMembers, no ``job-uid`` label) and compared by its
roles only (:func:`group_out_of_sync`).

Pure: the job and the Workload object in; which job adopts it, the workload the log holds for it and
why it is out of sync out. The watcher publishes them (:mod:`kueue_es.services.watcher.prebuilt_tracking`),
the dispatcher writes the ownership (:mod:`kueue_es.services.dispatcher.object_sync`).
"""

from __future__ import annotations

import decimal
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from kueue_es.events import job_owners, manifests, models, quantities, slices
from kueue_es.jobframework import workloads
from kueue_es.jobframework.annotations import IS_GROUP_WORKLOAD_ANNOTATION

OUT_OF_SYNC_REASON = "OutOfSync"
"""Kueue's WorkloadFinishedReasonOutOfSync."""
OUT_OF_SYNC_MESSAGE = "The prebuilt workload is out of sync with its user job"
"""The Finished condition's message Kueue writes with it (reconciler.go ensurePrebuiltWorkloadInSync)."""


def controller_uid(workload_object: Mapping[str, Any]) -> str | None:
    """The UID of the object that controls a Workload object (its ``controller: true`` owner reference),
    or None when nothing controls it."""
    meta = workload_object.get("metadata")
    owner = workloads.controller_owner(meta if isinstance(meta, dict) else {})
    return None if owner is None else str(owner.get("uid") or "")


def adopter(
    workload_object: Mapping[str, Any], jobs: Sequence[Mapping[str, Any]], *, adopted_by: str = ""
) -> int | None:
    """Which of ``jobs`` (those naming the Workload) adopts it, as an index, or None: the one that controls it
    already; with no controller, the one the log says adopted it (``adopted_by``, its UID: the owner reference
    not written yet), else the oldest (creation time, then name), as the first of them Kueue reconciles would
    take it. None when another object controls it (Kueue: "The workload is already controlled by another
    object"; every job naming it waits)."""
    if not jobs:
        return None
    uids = [str((job.get("metadata") or {}).get("uid") or "") for job in jobs]
    controller = controller_uid(workload_object)
    if controller is not None:
        return uids.index(controller) if controller in uids else None
    if adopted_by and adopted_by in uids:
        return uids.index(adopted_by)

    def age(index: int) -> tuple[int, str]:
        meta = jobs[index].get("metadata") or {}
        try:
            created = manifests.parse_time_ms(meta.get("creationTimestamp"))
        except manifests.ManifestError:
            created = 0
        return created, str(meta.get("name") or "")

    return min(range(len(jobs)), key=age)


def is_adopted(workload: models.Workload) -> bool:
    """Whether a workload of the log is a prebuilt one its job adopted. A job's (not a Pod's): its owner is not
    what its UID comes from (a workload made for a job carries the job's UID:
    :func:`kueue_es.jobframework.workloads.new_workload`; an adopted one its Workload object's). A Pod's: it
    carries the ``kueue.x-k8s.io/prebuilt-workload-name`` annotation naming itself (:func:`adopted`), as the UID
    cannot tell (a pod group's own workload keeps the UID of a pod that may be gone, its owner the oldest left);
    an annotation, not the label: a workload made for pods carries their ``kueue.x-k8s.io/`` labels, and a
    StatefulSet's pods name their group's in that label (:func:`kueue_es.jobframework.pods.prebuilt_workload`).
    An elastic job's replacement slice has a UID of its own made from its job's and its name
    (:func:`kueue_es.events.slices.replacement_uid`): made for its job, not adopted."""
    owner = workload.owner
    if owner is None:
        return False
    if owner.kind == "Pod":
        return workload.metadata.annotations.get(workloads.PREBUILT_WORKLOAD_LABEL) == workload.metadata.name
    meta = workload.metadata
    if owner.uid == meta.uid:
        return False
    return meta.uid != slices.replacement_uid(job_uid=owner.uid, name=meta.name)


def group_on_prebuilt(workload: models.Workload) -> bool:
    """Whether a pod group's workload is one its pods name in ``kueue.x-k8s.io/prebuilt-workload-name``, so that
    Kueue's job reconciler takes the prebuilt path for the group (reconciler.go ensureOneWorkload) and never
    deletes a pod beyond its count (pod_controller.go removeExcessPods runs only from ConstructComposableWorkload
    and FindMatchingWorkloads, which that path skips): a prebuilt one the group adopted (:func:`is_adopted`), or
    a StatefulSet's or LeaderWorkerSet's group's, which Kueue's reconciler of that parent prebuilds and names on
    each pod (:func:`kueue_es.events.job_owners.serving_parent`; kueue-es makes it from the pods). Its pods
    beyond the count stay gated; such a group never gets the WaitingForReplacementPods condition either (its
    absent pods are counted in FindMatchingWorkloads only)."""
    return is_adopted(workload) or job_owners.serving_parent(workload) is not None


def members_name_prebuilt(members: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a pod group's pods (``members``, as the API server has them) name a prebuilt Workload
    (:func:`kueue_es.jobframework.workloads.prebuilt_workload`: the annotation or the label; a StatefulSet's and a
    LeaderWorkerSet's pods name their group's), which puts the group on Kueue's prebuilt path as
    :func:`group_on_prebuilt` says of its workload: for a writer that has the pods in hand."""
    return any(workloads.prebuilt_workload(pod) for pod in members)


def adopted(
    workload: models.Workload, ref: workloads.JobRef, *, queue: str, reserved: bool, group: bool = False
) -> models.Workload:
    """``workload`` (as its Workload object has it) adopted by the job ``ref``: owned by the job, without the
    ``kueue.x-k8s.io/job-uid`` label the ownership writes (so the workload reads the same before and after it
    is written), and in the job's LocalQueue ``queue`` unless it holds quota (``reserved``; QueueNameChange).

    Adopted by Pods (``ref`` a Pod: a single pod, or with ``group`` the oldest pod of a pod group), it also
    carries, on the log only, the ``kueue.x-k8s.io/prebuilt-workload-name`` annotation naming itself (what
    :func:`is_adopted` reads) and, for a group, Kueue's ``kueue.x-k8s.io/is-group-workload`` annotation, which
    the one Kueue makes for a group carries (and MultiKueue's copy of it): the services read it as the
    group's, named as the group is (Kueue's pod webhook: "prebuilt workload and pod group should be equal")."""
    meta = workload.metadata
    labels = {k: v for k, v in meta.labels.items() if k != workloads.JOB_UID_LABEL}
    annotations = meta.annotations
    if ref.kind == "Pod":
        annotations = {**annotations, workloads.PREBUILT_WORKLOAD_LABEL: meta.name}
        if group:
            annotations[IS_GROUP_WORKLOAD_ANNOTATION] = "true"
    spec = workload.spec if reserved or not queue else msgspec.structs.replace(workload.spec, queue_name=queue)
    return msgspec.structs.replace(
        workload,
        metadata=msgspec.structs.replace(meta, labels=labels, annotations=annotations),
        spec=spec,
        owner=workloads.owner_of(ref),
    )


def out_of_sync(
    job_workload: models.Workload,
    templates: Mapping[str, Mapping[str, Any]],
    workload_object: Mapping[str, Any],
    *,
    suspended: bool,
) -> str:
    """Why the prebuilt Workload object does not match its job, or "" when it does (Kueue EquivalentToWorkload).

    ``job_workload``: the workload the job would get (its pod sets' counts and min counts, its maximum
    execution time); ``templates``: the job's pod templates by pod set name; ``suspended``: whether the job is.
    Pod sets are compared in order, as Kueue's ComparePodSetSlices: count, minCount, the templates'
    containers and init containers, and their tolerations unless the Workload is admitted (a start adds the
    flavors'). While the Workload holds quota the job is compared with it as it runs (a partially admitted pod
    set's count is the admitted one: expectedRunningPodSets), and a suspended job also with its spec. Values
    are compared as Kubernetes' semantic equality does: a field absent, null, empty list or empty map are the
    same, quantities by their value. Kueue compares a job running with quota that is not admitted (stopped
    after an eviction) against the Workload's tolerations with the flavors' merged in: here the tolerations
    are then not compared.
    """
    spec = workload_object.get("spec") or {}
    status = workload_object.get("status") or {}
    wanted = job_workload.spec.maximum_execution_time_seconds
    have = workloads.parse_int(spec.get("maximumExecutionTimeSeconds"))
    if wanted != have:
        return f"maximumExecutionTimeSeconds is {_shown(have)}, the job's is {_shown(wanted)}"
    pod_sets = [ps if isinstance(ps, dict) else {} for ps in spec.get("podSets") or []]
    admitted = any(
        isinstance(c, dict) and c.get("type") == "Admitted" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    admission = status.get("admission")
    if isinstance(admission, dict):
        counts = {
            str(a.get("name") or ""): a.get("count")
            for a in admission.get("podSetAssignments") or []
            if isinstance(a, dict)
        }
        running = [
            {**ps, "count": counts.get(str(ps.get("name") or ""), ps.get("count"))} if "minCount" in ps else ps
            for ps in pod_sets
        ]
        why = _compare(job_workload, templates, running, tolerations=not admitted and suspended)
        if not why or not suspended:
            return why
    return _compare(job_workload, templates, pod_sets, tolerations=not admitted)


def group_out_of_sync(roles: Sequence[tuple[str, int]], workload_object: Mapping[str, Any]) -> str:
    """Why the prebuilt Workload object does not match the pod group that names it, or "" when it does (Kueue
    pod_controller.go equivalentToWorkload, not the jobs' EquivalentToWorkload).

    ``roles``: the pod sets the group's pods make now, ``(role hash, pods)`` sorted by role
    (:func:`kueue_es.jobframework.pods.group_roles`). Each must be a pod set of the Workload named by the role,
    in that order (the Workload may have more), holding at least as many pods: a group still being created,
    or whose pods failed, matches the Workload made for it whole. Neither templates nor the maximum execution
    time are compared."""
    spec = workload_object.get("spec") or {}
    pod_sets = [ps if isinstance(ps, dict) else {} for ps in spec.get("podSets") or []]
    if len(pod_sets) < len(roles):
        return f"the Workload has {len(pod_sets)} pod sets, the group's pods make {len(roles)}"
    names = [str(ps.get("name") or "") for ps in pod_sets]
    index = -1
    for role, count in roles:
        try:
            index = names.index(role, index + 1)
        except ValueError:
            return f"spec.podSets has no pod set {role!r} (the role of {count} of the group's pods) in order"
        have = workloads.parse_int(pod_sets[index].get("count"))
        have = 1 if have is None else have  # the API's default
        if have < count:
            return f"spec.podSets[{index}].count is {have}, the group has {count} pods of role {role}"
    return ""


def _compare(
    job_workload: models.Workload,
    templates: Mapping[str, Mapping[str, Any]],
    pod_sets: list[dict[str, Any]],
    *,
    tolerations: bool,
) -> str:
    mine = job_workload.spec.pod_sets
    if len(mine) != len(pod_sets):
        return f"the Workload has {len(pod_sets)} pod sets, the job {len(mine)}"
    for index, (job_set, theirs) in enumerate(zip(mine, pod_sets, strict=True)):
        where = f"spec.podSets[{index}]"
        if workloads.parse_int(theirs.get("count")) != job_set.count:
            return f"{where}.count is {_shown(theirs.get('count'))}, the job has {job_set.count} pods"
        if workloads.parse_int(theirs.get("minCount")) != job_set.min_count:
            return f"{where}.minCount is {_shown(theirs.get('minCount'))}, the job's is {_shown(job_set.min_count)}"
        job_spec = (templates.get(job_set.name) or {}).get("spec") or {}
        template = theirs.get("template")
        their_spec = (template.get("spec") if isinstance(template, dict) else None) or {}
        fields = ("containers", "initContainers", "tolerations") if tolerations else ("containers", "initContainers")
        for name in fields:
            if _semantic({name: job_spec.get(name)}) != _semantic({name: their_spec.get(name)}):
                return f"{where}.template.spec.{name} differ from the job's"
    return ""


def _semantic(value: Any, *, amounts: bool = False) -> Any:
    """``value`` as Kubernetes' semantic equality sees it: nulls, empty lists and empty maps left out of maps
    (Go decodes each of them to a nil or empty field), and, in a map of ``amounts`` (a ``requests`` or
    ``limits``), quantities by their value."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            seen = _semantic(item, amounts=key in ("requests", "limits"))
            if seen is None or seen == [] or seen == {}:
                continue
            out[key] = _amount(seen) if amounts else seen
        return out
    if isinstance(value, list):
        return [_semantic(item) for item in value]
    return value


def _amount(value: Any) -> Any:
    try:
        return quantities.parse_decimal(value)
    except (quantities.QuantityError, decimal.InvalidOperation):
        return value


def _shown(value: Any) -> str:
    return "unset" if value is None else str(value)
