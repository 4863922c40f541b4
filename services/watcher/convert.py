"""The watcher's pure core: Kubernetes objects in, facts out.

Kueue objects become ``*Observed`` facts; a batch/v1 Job with the
``kueue.x-k8s.io/queue-name`` label becomes the Workload Kueue would create for it
(SEMANTICS §2.1-§2.2, Kueue pkg/controller/jobs/job/job_controller.go): one pod
set ``main`` with ``count = min(parallelism, completions)`` pods and the pod
template's requests; a finished Job becomes WorkloadFinished; a Job the dispatcher
stopped for an eviction becomes WorkloadStopped once no pod of it is active. Anything
that cannot be converted becomes an ObjectRejected fact naming the object and the
field, so a user can see it on the log while the last valid version stays in force.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

from events import manifests, models, types
from services.dispatcher.core import EVICTED_ANNOTATION, EVICTION_SEQ_ANNOTATION

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
MIN_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-min-parallelism"
JOB_API = "batch/v1"

_OBSERVED = {
    "ResourceFlavor": lambda obj: types.ResourceFlavorObserved(flavor=obj),
    "ClusterQueue": lambda obj: types.ClusterQueueObserved(cluster_queue=obj),
    "Cohort": lambda obj: types.CohortObserved(cohort=obj),
    "LocalQueue": lambda obj: types.LocalQueueObserved(local_queue=obj),
    "WorkloadPriorityClass": lambda obj: types.WorkloadPriorityClassObserved(priority_class=obj),
    "Workload": lambda obj: types.WorkloadObserved(workload=obj),
    "Namespace": lambda obj: types.NamespaceObserved(namespace=obj),
    "AdmissionCheck": lambda obj: types.AdmissionCheckObserved(admission_check=obj),
    "Configuration": lambda obj: types.ConfigurationObserved(configuration=obj),
}


def kueue_fact(manifest: dict[str, Any], *, now_ms: int = 0) -> types.Fact:
    """The fact for one kueue.x-k8s.io object: ``*Observed``, or ObjectRejected if it is invalid."""
    try:
        obj = manifests.parse_object(manifest)
    except manifests.ManifestError as err:
        return rejected(manifest, err, now_ms=now_ms)
    return _OBSERVED[type(obj).__name__](obj)


def rejected(manifest: dict[str, Any], err: manifests.ManifestError, *, now_ms: int = 0) -> types.ObjectRejected:
    """An ObjectRejected fact for a manifest that failed conversion."""
    meta = manifest.get("metadata") or {}
    return types.ObjectRejected(
        kind=str(manifest.get("kind") or err.kind),
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or err.name),
        field=err.field,
        problem=err.problem,
        at_ms=now_ms,
    )


def workload_name_for_job(job_name: str, job_uid: str) -> str:
    """The Workload name Kueue gives a Job: ``job-<name>-<5 hex chars>``, within 253 characters.

    Same shape as Kueue's GetWorkloadNameForOwnerWithGVK (pkg/controller/jobframework);
    the hash covers kind, group, name and UID so a re-created Job gets a new name.
    """
    digest = hashlib.sha1(f"Job\nbatch\n{job_name}\n{job_uid}".encode()).hexdigest()[:5]
    return f"job-{job_name}"[:247] + f"-{digest}"


def job_facts(job: dict[str, Any], *, now_ms: int = 0) -> types.Fact | None:
    """The fact a batch/v1 Job stands for, or None when Kueue does not manage it.

    A Job without the queue-name label is not managed (manageJobsWithoutQueueName
    defaults to false). A finished Job (condition Complete or Failed) gives
    WorkloadFinished; any other gives WorkloadObserved; a Job that cannot be
    converted gives ObjectRejected.
    """
    meta = job.get("metadata") or {}
    if not (meta.get("labels") or {}).get(QUEUE_LABEL):
        return None
    finished = finished_condition(job)
    name = workload_name_for_job(meta.get("name", ""), meta.get("uid", ""))
    if finished is not None:
        ref = types.WorkloadRef(namespace=meta.get("namespace", "default"), name=name, uid=meta.get("uid", ""))
        succeeded = finished.get("type") == "Complete"
        return types.WorkloadFinished(
            workload=ref,
            succeeded=succeeded,
            reason="Succeeded" if succeeded else "Failed",
            message=finished.get("message") or ("Job finished successfully" if succeeded else "Job failed"),
            at_ms=manifests.parse_time_ms(finished.get("lastTransitionTime")) or now_ms,
        )
    try:
        return types.WorkloadObserved(workload=job_to_workload(job))
    except manifests.ManifestError as err:
        return rejected(job, err, now_ms=now_ms)


def stopped_fact(job: dict[str, Any], *, now_ms: int = 0) -> types.WorkloadStopped | None:
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
    if not (meta.get("labels") or {}).get(QUEUE_LABEL) or not reason or spec.get("suspend") is not True:
        return None
    if (job.get("status") or {}).get("active") or finished_condition(job) is not None:
        return None
    ref = types.WorkloadRef(
        namespace=meta.get("namespace", "default"),
        name=workload_name_for_job(meta.get("name", ""), meta.get("uid", "")),
        uid=meta.get("uid", ""),
    )
    return types.WorkloadStopped(workload=ref, reason=str(reason), at_ms=now_ms)


def stop_version(job: dict[str, Any]) -> str:
    """The dedup version of a Job's WorkloadStopped: one per eviction, not per observation.

    ``evict-<seq>`` from the dispatcher's :data:`EVICTION_SEQ_ANNOTATION`, so every
    sight of one stopped Job (status writes, relists, a restarted watcher) gives the
    same Msg-Id, the one the dispatcher uses when the Job is gone; the
    resourceVersion stands in on a Job marked without it.
    """
    meta = job.get("metadata") or {}
    seq = (meta.get("annotations") or {}).get(EVICTION_SEQ_ANNOTATION)
    return f"evict-{seq}" if seq else str(meta.get("resourceVersion") or "")


def finished_condition(job: dict[str, Any]) -> dict[str, Any] | None:
    """The Job's Complete or Failed condition when it is True, else None."""
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            return condition
    return None


def job_to_workload(job: dict[str, Any]) -> models.Workload:
    """The Workload Kueue creates for a batch/v1 Job (SEMANTICS §2.1-§2.2).

    Raises ManifestError (kind Job) for a bad quantity, parallelism or annotation.
    """
    meta, spec = job.get("metadata") or {}, job.get("spec") or {}
    job_name = f"{meta.get('namespace', 'default')}/{meta.get('name', '')}"
    count = _non_negative_int(spec.get("parallelism", 1), field="spec.parallelism", job=job_name)
    if spec.get("completions") is not None:
        count = min(count, _non_negative_int(spec["completions"], field="spec.completions", job=job_name))
    annotations = meta.get("annotations") or {}
    min_count = None
    if annotations.get(MIN_PARALLELISM_ANNOTATION) is not None:
        min_count = _non_negative_int(
            annotations[MIN_PARALLELISM_ANNOTATION],
            field=f"metadata.annotations[{MIN_PARALLELISM_ANNOTATION}]",
            job=job_name,
        )
    pod_spec = (spec.get("template") or {}).get("spec") or {}
    pod_set = models.PodSet(
        name="main",
        count=count,
        min_count=min_count if min_count and min_count < count else None,
        requests=manifests.pod_requests(pod_spec, where="spec.template.spec", kind="Job", name=job_name),
        node_selector=dict(pod_spec.get("nodeSelector") or {}),
        tolerations=[_toleration(t) for t in pod_spec.get("tolerations") or []],
        required_node_affinity=msgspec.convert(
            manifests.required_node_affinity(pod_spec), list[models.NodeSelectorTerm]
        ),
        misconfigured=manifests.requests_over_limits(pod_spec, where="spec.template.spec"),
    )
    labels = meta.get("labels") or {}
    priority_class = labels.get(PRIORITY_CLASS_LABEL)
    return models.Workload(
        metadata=models.ObjectMeta(
            name=workload_name_for_job(meta.get("name", ""), meta.get("uid", "")),
            namespace=meta.get("namespace", "default"),
            uid=meta.get("uid", ""),
            labels={k: v for k, v in labels.items() if k.startswith("kueue.x-k8s.io/")},
            creation_timestamp_ms=manifests.parse_time_ms(
                meta.get("creationTimestamp"), kind="Job", name=job_name, field="metadata.creationTimestamp"
            ),
        ),
        spec=models.WorkloadSpec(
            pod_sets=[pod_set],
            queue_name=labels.get(QUEUE_LABEL, ""),
            priority_class_ref=models.PriorityClassRef(name=priority_class) if priority_class else None,
        ),
        owner=models.OwnerReference(
            api_version=JOB_API, kind="Job", name=meta.get("name", ""), uid=meta.get("uid", "")
        ),
    )


def _non_negative_int(value: Any, *, field: str, job: str) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = -1
    if number < 0 or isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise manifests.ManifestError(
            kind="Job", name=job, field=field, problem=f"{value!r} is not a non-negative integer"
        )
    return number


def _toleration(raw: dict[str, Any]) -> models.Toleration:
    return models.Toleration(
        key=raw.get("key", ""),
        operator=raw.get("operator", "Equal"),
        value=raw.get("value", ""),
        effect=raw.get("effect", ""),
        toleration_seconds=raw.get("tolerationSeconds"),
    )
