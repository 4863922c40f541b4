"""A JobSet (jobset.x-k8s.io/v1alpha2) to the Workload Kueue creates for it.

Why this module exists: a JobSet runs several groups of Jobs ("replicated jobs")
that must start together, so Kueue admits it as one Workload with one pod set per
replicated job (Kueue pkg/controller/jobs/jobset/jobset_controller.go). The Jobs
the JobSet controller creates are part of that workload, not workloads of their own
(:func:`kueue_es.jobframework.workloads.owned_by_managed_job`). What is shared with
the other integrations is in :mod:`kueue_es.jobframework.workloads`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kueue_es.events import manifests, models, types
from kueue_es.jobframework import workloads

JOBSET_API = "jobset.x-k8s.io/v1alpha2"
JOBSET_GROUP = "jobset.x-k8s.io"
#: The label JobSet puts on the pods of each child Job: its index among the replicas (jobsetapi.JobIndexKey).
JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"


def workload_name_for_jobset(name: str, uid: str) -> str:
    """``jobset-<name>-<5 hex>`` (jobset_controller.go GetWorkloadNameForJobSet)."""
    return workloads.workload_name(owner_name=name, owner_uid=uid, kind="JobSet", group=JOBSET_GROUP)


def jobset_facts(
    jobset: Mapping[str, Any], *, now_ms: int = 0, context: workloads.Context | None = None
) -> types.Fact | None:
    """The fact a JobSet stands for, or None when Kueue does not manage it.

    Managed as a batch/v1 Job is (the queue-name label, or
    ``manageJobsWithoutQueueName``). A JobSet whose ``Completed`` or ``Failed``
    condition is True gives WorkloadFinished (jobset_controller.go Finished); any
    other WorkloadObserved; one that cannot be converted ObjectRejected.
    """
    context = context or workloads.Context()
    ref = workloads.job_ref(jobset, kind="JobSet", api_version=JOBSET_API)
    try:
        if workloads.owned_by_managed_job(ref, context) or workloads.queue_name(ref, context) is None:
            return None
    except manifests.ManifestError as err:
        return workloads.rejected(jobset, err, now_ms=now_ms)
    finished = workloads.true_condition(jobset, ("Completed", "Failed"))
    if finished is not None:
        succeeded = finished.get("type") == "Completed"
        return workloads.finished_fact(
            ref,
            name=workload_name_for_jobset(ref.name, ref.uid),
            succeeded=succeeded,
            message=str(finished.get("message") or ("JobSet completed" if succeeded else "JobSet failed")),
            at_ms=manifests.parse_time_ms(finished.get("lastTransitionTime")) or now_ms,
        )
    try:
        return types.WorkloadObserved(workload=jobset_to_workload(jobset, context=context))
    except manifests.ManifestError as err:
        return workloads.rejected(jobset, err, now_ms=now_ms)


def jobset_to_workload(jobset: Mapping[str, Any], *, context: workloads.Context | None = None) -> models.Workload:
    """The Workload of a JobSet: one pod set per replicated job, in spec order (jobset_controller.go PodSets).

    Pod set ``name`` is the replicated job's name; ``count`` is ``replicas``
    (default 1) times the pods of one Job, ``min(parallelism, completions)``
    (parallelism default 1, completions default parallelism: PodsCountPerReplica).
    No partial admission (no minCount). Priority from the first replicated job
    whose pod template names a ``priorityClassName`` (SEMANTICS §2.4). Raises
    ManifestError (kind JobSet) naming the replicated job's field.
    """
    context = context or workloads.Context()
    ref = workloads.job_ref(jobset, kind="JobSet", api_version=JOBSET_API)
    spec = jobset.get("spec")
    if not isinstance(spec, dict):
        raise ref.error(field="spec", problem="must be a mapping")
    replicated = spec.get("replicatedJobs")
    if not isinstance(replicated, list):
        raise ref.error(field="spec.replicatedJobs", problem="must be a list of replicated jobs")
    pod_sets: list[models.PodSet] = []
    pod_specs: list[tuple[str, Any]] = []
    for index, rjob in enumerate(replicated):
        pod_set, where, pod_spec = _pod_set(ref, rjob, where=f"spec.replicatedJobs[{index}]", context=context)
        pod_sets.append(pod_set)
        pod_specs.append((where, pod_spec))
    workloads.check_pod_sets(ref, pod_sets, field="spec.replicatedJobs")
    workloads.check_topology_groups(
        ref, pod_sets, where=[w.removesuffix(".spec") + ".metadata.annotations" for w, _ in pod_specs]
    )
    queue = workloads.queue_name(ref, context)
    return workloads.new_workload(
        ref,
        name=workload_name_for_jobset(ref.name, ref.uid),
        pod_sets=pod_sets,
        queue=queue or "",
        pod_specs=pod_specs,
        context=context,
        owner=workloads.owner_of(ref),
    )


def _pod_set(
    ref: workloads.JobRef, rjob: Any, *, where: str, context: workloads.Context
) -> tuple[models.PodSet, str, Any]:
    """The pod set of one replicated job, the field path of its pod spec, and the pod spec."""
    if not isinstance(rjob, dict):
        raise ref.error(field=where, problem="must be a mapping (a replicated job)")
    name = rjob.get("name")
    if not isinstance(name, str) or not name:
        raise ref.error(field=f"{where}.name", problem="is required")
    replicas = workloads.count_field(ref, rjob.get("replicas"), field=f"{where}.replicas", default=1)
    job_template = rjob.get("template")
    if job_template is not None and not isinstance(job_template, dict):
        raise ref.error(field=f"{where}.template", problem="must be a mapping (a Job template)")
    job_spec = (job_template or {}).get("spec")
    if job_spec is not None and not isinstance(job_spec, dict):
        raise ref.error(field=f"{where}.template.spec", problem="must be a mapping (a Job spec)")
    job_spec = job_spec or {}
    job_where = f"{where}.template.spec"
    per_job = workloads.count_field(ref, job_spec.get("parallelism"), field=f"{job_where}.parallelism", default=1)
    completions = workloads.count_field(
        ref, job_spec.get("completions"), field=f"{job_where}.completions", default=per_job
    )
    pod_spec = workloads.pod_spec_at(ref, job_spec.get("template"), where=f"{job_where}.template")
    pod_where = f"{job_where}.template.spec"
    count = replicas * min(per_job, completions)
    template = job_spec.get("template")
    request = workloads.topology_request(
        ref,
        workloads.template_annotations(ref, template, where=f"{job_where}.template"),
        where=f"{job_where}.template.metadata.annotations",
        count=count,
        pod_index_label=workloads.JOB_COMPLETION_INDEX_LABEL,
        sub_group_index_label=JOB_INDEX_LABEL,
        sub_group_count=replicas,
    )
    pod_set = workloads.pod_set(
        ref, name=name, count=count, pod_spec=pod_spec, where=pod_where, context=context, topology_request=request
    )
    return pod_set, pod_where, pod_spec


def reclaimable_pods(jobset: Mapping[str, Any]) -> dict[str, int]:
    """The JobSet's reclaimable pods per pod set (replicated job), ``{}`` when none (Kueue
    jobset_controller.go ReclaimablePods): a replicated job whose ``status.replicatedJobsStatus``
    entry counts ``succeeded`` Jobs (at most its replicas) gives back that many Jobs' pods,
    ``min(parallelism, completions)`` each (PodsCountPerReplica). Malformed values count as 0
    or their default (the conversion reports them)."""
    statuses = {
        str(entry.get("name")): entry
        for entry in workloads.as_mapping(jobset.get("status")).get("replicatedJobsStatus") or []
        if isinstance(entry, dict)
    }
    out: dict[str, int] = {}
    for rjob in workloads.as_mapping(jobset.get("spec")).get("replicatedJobs") or []:
        if not isinstance(rjob, dict) or not isinstance(rjob.get("name"), str):
            continue
        entry = statuses.get(rjob["name"])
        succeeded = workloads.parse_int(entry.get("succeeded")) if entry is not None else None
        replicas = workloads.parse_int(rjob.get("replicas"))
        replicas = 1 if replicas is None else replicas
        if not succeeded or succeeded <= 0 or succeeded > replicas:
            continue
        job_spec = workloads.as_mapping(workloads.as_mapping(rjob.get("template")).get("spec"))
        per_job = workloads.parse_int(job_spec.get("parallelism"))
        per_job = 1 if per_job is None else per_job
        completions = workloads.parse_int(job_spec.get("completions"))
        per_job = min(per_job, per_job if completions is None else completions)
        out[rjob["name"]] = succeeded * per_job
    return out
