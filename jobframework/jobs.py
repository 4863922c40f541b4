"""A batch/v1 Job to the Workload Kueue creates for it (Kueue pkg/controller/jobs/job/job_controller.go).

Why this module exists: a Job is the simplest integration -- one pod set ``main``
with ``count = min(parallelism, completions)`` pods (SEMANTICS §2) -- and the one
the dispatcher stops and starts by ``spec.suspend``. A finished Job becomes
WorkloadFinished; a Job the dispatcher stopped for an eviction
(:data:`kueue_es.jobframework.annotations.EVICTED_ANNOTATION`) becomes
WorkloadStopped once no pod of it is active; a Job that cannot be converted
becomes an ObjectRejected fact naming the field, so a user can see it on the log
while the last valid version stays in force. JobSets are in
:mod:`kueue_es.jobframework.jobsets`, Pods in :mod:`kueue_es.jobframework.pods`,
and what they all share in :mod:`kueue_es.jobframework.workloads`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from kueue_es.events import manifests, models, types
from kueue_es.jobframework import goint, workloads
from kueue_es.jobframework.annotations import EVICTED_ANNOTATION, EVICTION_SEQ_ANNOTATION

MIN_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-min-parallelism"
COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-completions-equal-parallelism"
_GO_TRUE = ("1", "t", "T", "TRUE", "true", "True")  # what Go's strconv.ParseBool reads as true
JOB_API = "batch/v1"
#: The pod template labels kube-apiserver gives a Job (batch job strategy.go generateSelector) and its Job
#: controller puts on the pods: the name and the UID, each in its legacy and its ``batch.kubernetes.io/`` form.
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
LEGACY_JOB_NAME_LABEL = "job-name"
LEGACY_CONTROLLER_UID_LABEL = "controller-uid"
JOB_CONTROLLER_LABELS = (LEGACY_JOB_NAME_LABEL, LEGACY_CONTROLLER_UID_LABEL, JOB_NAME_LABEL, CONTROLLER_UID_LABEL)


def workload_name_for_job(job_name: str, job_uid: str) -> str:
    """The Workload name Kueue gives a batch/v1 Job: ``job-<name>-<5 hex chars>``, within 253 characters.

    Kueue job_controller.go GetWorkloadNameForJob (workloads.workload_name).
    """
    return workloads.workload_name(owner_name=job_name, owner_uid=job_uid, kind="Job", group="batch")


def workload_template(template: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a Job's pod ``template`` as Kueue's Workload carries it in ``spec.podSets[].template``: without
    the labels the Job controller manages (:data:`JOB_CONTROLLER_LABELS`) but ``batch.kubernetes.io/job-name``,
    as they are the Job's own and no pod set's (Kueue jobs/job/job_controller.go cleanLabels, in PodSets).
    A ``labels`` map left empty goes too, as Go's JSON leaves an empty map out."""
    out = copy.deepcopy(dict(template))
    metadata = out.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    if not isinstance(metadata, dict) or not isinstance(labels, dict):
        return out
    kept = {k: v for k, v in labels.items() if k == JOB_NAME_LABEL or k not in JOB_CONTROLLER_LABELS}
    if kept:
        metadata["labels"] = kept
    else:
        del metadata["labels"]
    return out


def job_facts(
    job: Mapping[str, Any], *, now_ms: int = 0, context: workloads.Context | None = None
) -> types.Fact | None:
    """The fact a batch/v1 Job stands for, or None when Kueue does not manage it.

    Not managed: a Job without the queue-name label while ``manageJobsWithoutQueueName``
    is off (its default), and a Job whose controller chain reaches a job Kueue manages (a
    JobSet's Job: :func:`~kueue_es.jobframework.workloads.managed_ancestor`, jobframework
    FindAncestorJobManagedByKueue); a chain deeper than Kueue walks is refused (ObjectRejected on
    ``metadata.ownerReferences``, Kueue's JobNestingTooDeep). A Job created by a CronJob is
    managed like any other (its label comes from the CronJob's ``jobTemplate``). A
    finished Job (condition Complete or Failed) gives WorkloadFinished with that condition's message, empty
    when it has none (job_controller.go Finished); any other
    WorkloadObserved; a Job that cannot be converted ObjectRejected. A Job naming a prebuilt
    Workload (:func:`~kueue_es.jobframework.workloads.prebuilt_workload`, Kueue's ``kueue.x-k8s.io/prebuilt-workload-name``) adopts it:
    no WorkloadObserved of its own, and its finish is that Workload's WorkloadFinished.
    """
    context = context or workloads.Context()
    ref = workloads.job_ref(job, kind="Job", api_version=JOB_API)
    try:
        if (
            not context.namespace_managed(ref.namespace)
            or workloads.managed_ancestor(ref, context)
            or workloads.queue_name(ref, context) is None
        ):
            return None
    except manifests.ManifestError as err:
        return workloads.rejected(job, err, now_ms=now_ms)
    finished = finished_condition(job)
    prebuilt = workloads.prebuilt_workload(job)
    if finished is not None:
        succeeded = finished.get("type") == "Complete"
        return workloads.finished_fact(
            ref,
            name=prebuilt or workload_name_for_job(ref.name, ref.uid),
            succeeded=succeeded,
            message=str(finished.get("message") or ""),
            at_ms=workloads.status_time_ms(finished.get("lastTransitionTime"), default=now_ms),
            uid="" if prebuilt else None,
        )
    if prebuilt:
        return None  # the Workload exists already (a MultiKueue copy on a worker): adopted, not made again
    try:
        return types.WorkloadObserved(workload=job_to_workload(job, context=context))
    except manifests.ManifestError as err:
        return workloads.rejected(job, err, now_ms=now_ms)


def stopped_fact(job: Mapping[str, Any], *, now_ms: int = 0) -> types.WorkloadStopped | None:
    """WorkloadStopped when an evicted Job no longer runs, else None.

    Kueue's job reconciler, on an Evicted workload, stops the job and, once
    ``!job.IsActive()`` (for a batch/v1 Job: ``status.active`` is 0), clears the
    quota reservation (jobframework/reconciler.go step 6 "handle eviction";
    jobs/job/job_controller.go IsActive). Here the eviction is the dispatcher's
    :data:`EVICTED_ANNOTATION` (its value is the reason) on a Job with
    ``spec.suspend: true``; a finished Job gives WorkloadFinished instead.
    ``at_ms`` is ``now_ms``, when the stop was seen (ms since the epoch).
    """
    meta, spec = job.get("metadata") or {}, job.get("spec") or {}
    reason = (meta.get("annotations") or {}).get(EVICTED_ANNOTATION)
    if not (meta.get("labels") or {}).get(workloads.QUEUE_LABEL) or not reason or spec.get("suspend") is not True:
        return None
    if (job.get("status") or {}).get("active") or finished_condition(job) is not None:
        return None
    ref = types.WorkloadRef(
        namespace=meta.get("namespace", "default"),
        name=workload_name_for_job(meta.get("name", ""), meta.get("uid", "")),
        uid=meta.get("uid", ""),
    )
    return types.WorkloadStopped(workload=ref, reason=str(reason), at_ms=now_ms)


def stop_version(job: Mapping[str, Any]) -> str:
    """The dedup version of a Job's WorkloadStopped: one per eviction, not per observation.

    ``evict-<seq>`` from the dispatcher's :data:`EVICTION_SEQ_ANNOTATION`, so every
    sight of one stopped Job (status writes, relists, a restarted watcher) gives the
    same Msg-Id, the one the dispatcher uses when the Job is gone; the
    resourceVersion stands in on a Job marked without it.
    """
    meta = job.get("metadata") or {}
    seq = (meta.get("annotations") or {}).get(EVICTION_SEQ_ANNOTATION)
    return f"evict-{seq}" if seq else str(meta.get("resourceVersion") or "")


def finished_condition(job: Mapping[str, Any]) -> Any:
    """The Job's Complete or Failed condition when it is True, else None (job_controller.go Finished)."""
    return workloads.true_condition(job, ("Complete", "Failed"))


def job_to_workload(job: Mapping[str, Any], *, context: workloads.Context | None = None) -> models.Workload:
    """The Workload Kueue creates for a batch/v1 Job (SEMANTICS §2.1-§2.2, Kueue jobs/job/job_controller.go).

    One pod set ``main`` of ``min(parallelism, completions)`` pods (parallelism 1
    and completions unbounded when absent: podsCount); ``minCount`` from the
    ``kueue.x-k8s.io/job-min-parallelism`` annotation (minPodsCount), which Kueue's
    webhook accepts only as an integer in 1..count-1 at creation (validatePartialAdmissionCreate); a
    started Job (``spec.suspend: false``, as the API server defaults it) may run at its minimum after a
    partial admission, count == minCount, which Kueue's minPodsCount reads unchecked.
    The template's TAS annotations give the pod set's ``topologyRequest`` (SEMANTICS-ADVANCED A.4.1, with
    the completion index label as rank hint). Raises ManifestError (kind Job) for a bad quantity, count, annotation or label.
    """
    context = context or workloads.Context()
    ref = workloads.job_ref(job, kind="Job", api_version=JOB_API)
    spec = job.get("spec")
    if spec is not None and not isinstance(spec, dict):
        raise ref.error(field="spec", problem="must be a mapping")
    spec = spec or {}
    count = workloads.count_field(ref, spec.get("parallelism"), field="spec.parallelism", default=1)
    if spec.get("completions") is not None:
        count = min(count, workloads.count_field(ref, spec["completions"], field="spec.completions", default=count))
    pod_spec = workloads.pod_spec_at(ref, spec.get("template"), where="spec.template")
    annotations_where = "spec.template.metadata.annotations"
    pod_set = workloads.pod_set(
        ref,
        name="main",
        count=count,
        pod_spec=pod_spec,
        where="spec.template.spec",
        min_count=_min_count(ref, count=count, started=spec.get("suspend") is False),
        context=context,
        topology_request=workloads.topology_request(
            ref,
            workloads.template_annotations(ref, spec.get("template"), where="spec.template"),
            where=annotations_where,
            count=count,
            pod_index_label=workloads.JOB_COMPLETION_INDEX_LABEL,
            context=context,
        ),
    )
    queue = workloads.queue_name(ref, context)
    return workloads.new_workload(
        ref,
        name=workload_name_for_job(ref.name, ref.uid),
        pod_sets=[pod_set],
        queue=queue or "",
        pod_specs=[("spec.template.spec", pod_spec)],
        context=context,
        owner=workloads.owner_of(ref),
    )


def accepts_partial_admission(annotations: Mapping[str, str]) -> bool:
    """Whether a Job may run with fewer pods than it asks for: it carries an integer
    ``kueue.x-k8s.io/job-min-parallelism`` annotation Go's strconv.Atoi reads (job_controller.go minPodsCount)."""
    raw = annotations.get(MIN_PARALLELISM_ANNOTATION)
    if raw is None:
        return False
    try:
        goint.atoi(str(raw))
    except goint.GoNumError:
        return False
    return True


def completions_follow_parallelism(annotations: Mapping[str, str]) -> bool:
    """Whether a partially admitted Job's ``spec.completions`` is changed with its parallelism: the
    ``kueue.x-k8s.io/job-completions-equal-parallelism`` annotation reads true as Go's strconv.ParseBool
    reads it (job_controller.go syncCompletionWithParallelism); anything else, or absent, is false."""
    raw = annotations.get(COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION)
    return raw in _GO_TRUE


def started_pod_counts(annotations: Mapping[str, str], *, admitted: int) -> dict[str, int]:
    """The ``spec`` fields Kueue sets on a Job it starts with ``admitted`` pods (the admission's pod set
    count): ``parallelism`` (and ``completions`` when :func:`completions_follow_parallelism`) for a Job
    that :func:`accepts_partial_admission`, else nothing (job_controller.go RunWithPodSetsInfo).

    ``annotations``: the Job's ``metadata.annotations``. Returns a dict to merge into ``spec``.
    """
    if not accepts_partial_admission(annotations):
        return {}
    out = {"parallelism": admitted}
    if completions_follow_parallelism(annotations):
        out["completions"] = admitted
    return out


def restored_pod_counts(annotations: Mapping[str, str], spec: Mapping[str, Any], *, count: int) -> dict[str, int]:
    """The ``spec`` fields Kueue gives back to a Job it stops: for a Job that
    :func:`accepts_partial_admission` and whose ``parallelism`` is not the Workload's pod set ``count``
    (what it asked for), ``parallelism`` (and ``completions`` when :func:`completions_follow_parallelism`)
    set to ``count``; else nothing (job_controller.go RestorePodSetsInfo, from the Workload's pod sets).

    ``spec``: the Job's current ``spec``. Returns a dict to merge into ``spec``.
    """
    current = workloads.parse_int(spec.get("parallelism"))
    if not accepts_partial_admission(annotations) or (1 if current is None else current) == count:
        return {}
    out = {"parallelism": count}
    if completions_follow_parallelism(annotations):
        out["completions"] = count
    return out


def _min_count(ref: workloads.JobRef, *, count: int, started: bool) -> int | None:
    raw = ref.annotations.get(MIN_PARALLELISM_ANNOTATION)
    if raw is None:
        return None
    field = f"metadata.annotations[{MIN_PARALLELISM_ANNOTATION}]"
    try:
        # Kueue reads it with strconv.Atoi and keeps int32(value), which wraps (job_controller.go minPodsCount); its
        # webhook refuses what Atoi refuses, in Atoi's words (job_webhook.go validatePartialAdmissionCreate)
        written = goint.atoi(str(raw))
    except goint.GoNumError as err:
        raise ref.error(field=field, problem=str(err)) from err
    value = goint.int32(written)
    # a Job admitted at its minimum runs with parallelism == min-parallelism: Kueue's webhook bounds the
    # annotation below the count at creation only, and the Workload takes minCount <= count
    if written > 0 and started and 0 < value <= count:
        return value
    if written <= 0 or not 0 < value < count:
        raise ref.error(field=field, problem=f"{raw!r} should be an integer between 0 and {count - 1} (exclusive of 0)")
    return value


# -- dynamic reclaim ------------------------------------------------------------------------------


def reclaimable_pods(job: Mapping[str, Any]) -> dict[str, int]:
    """The Job's reclaimable pods, ``{"main": count}`` or ``{}`` (Kueue job_controller.go ReclaimablePods).

    The pods that ended (``status.succeeded``; for an Indexed Job the indexes listed in
    ``completedIndexes`` or ``failedIndexes`` below ``completions``, each counted once) leave
    ``completions - ended`` to run; when that is fewer than ``parallelism`` the difference is
    reclaimable. A Job of parallelism 1, or with nothing ended, has none. ``parallelism``
    defaults to 1 and ``completions`` to ``parallelism``; malformed values count as the default
    (the conversion reports them).
    """
    spec, status = workloads.as_mapping(job.get("spec")), workloads.as_mapping(job.get("status"))
    parallelism = workloads.parse_int(spec.get("parallelism"))
    parallelism = 1 if parallelism is None else parallelism
    completions = workloads.parse_int(spec.get("completions"))
    completions = parallelism if completions is None else completions
    if spec.get("completionMode") == "Indexed":
        ended = ended_indexes(status.get("completedIndexes"), status.get("failedIndexes"), completions=completions)
    else:
        ended = workloads.parse_int(status.get("succeeded")) or 0
    if parallelism <= 1 or ended <= 0:
        return {}
    remaining = max(completions - ended, 0)
    return {"main": parallelism - remaining} if remaining < parallelism else {}


def ended_indexes(completed: Any, failed: Any, *, completions: int) -> int:
    """How many indexes below ``completions`` the Job's ``completedIndexes`` and ``failedIndexes``
    (``"1,3-5"``) name together, each once (Kueue job_controller.go terminalIndexesCount);
    a malformed or descending interval is skipped."""
    ended: set[int] = set()
    for listed in (completed, failed):
        if not isinstance(listed, str) or not listed:
            continue
        for interval in listed.split(","):
            first, _, last = interval.partition("-")
            if not first.isdigit() or (last and not last.isdigit()):
                continue
            low, high = int(first), int(last) if last else int(first)
            if low <= high:
                ended.update(range(low, min(high, completions - 1) + 1))
    return len(ended)
