"""JobSet (jobset.x-k8s.io/v1alpha2): one pod set per replicated job, suspended by ``spec.suspend``.

Why this module exists: a JobSet runs several groups of Jobs ("replicated jobs")
that must start together, so Kueue admits it as one Workload with one pod set per
replicated job (Kueue pkg/controller/jobs/jobset/jobset_controller.go). The Jobs
the JobSet controller creates are part of that workload, not workloads of their own.
Names, constants and the older entry points are in :mod:`kueue_es.jobframework.jobsets`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kueue_es.jobframework import workloads
from kueue_es.jobframework.integrations import (
    Finished,
    Integration,
    PodSetSource,
    as_list,
    count_of,
    finished_by_conditions,
)

API_VERSION = "jobset.x-k8s.io/v1alpha2"
#: The label JobSet puts on the pods of each child Job: its index among the replicas (jobsetapi.JobIndexKey).
JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"


def pod_sets(ref: workloads.JobRef, jobset: Mapping[str, Any]) -> list[PodSetSource]:
    """One pod set per replicated job, in spec order (jobset_controller.go PodSets).

    Pod set ``name`` is the replicated job's name; ``count`` is ``replicas`` (default 1)
    times the pods of one Job, ``min(parallelism, completions)`` (parallelism default 1,
    completions default parallelism: PodsCountPerReplica). No partial admission.
    Raises ManifestError naming the replicated job's field.
    """
    replicated = jobset["spec"].get("replicatedJobs")
    if not isinstance(replicated, list):
        raise ref.error(field="spec.replicatedJobs", problem="must be a list of replicated jobs")
    out: list[PodSetSource] = []
    for index, rjob in enumerate(replicated):
        where = f"spec.replicatedJobs[{index}]"
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
        out.append(
            PodSetSource(
                name=name,
                count=replicas * min(per_job, completions),
                template_path=("spec", "replicatedJobs", index, "template", "spec", "template"),
                pod_index_label=workloads.JOB_COMPLETION_INDEX_LABEL,
                sub_group_index_label=JOB_INDEX_LABEL,
                sub_group_count=replicas,
            )
        )
    return out


def finished(jobset: Mapping[str, Any]) -> Finished | None:
    """The ``Completed`` or ``Failed`` condition when True, with its message, empty when it has none
    (jobset_controller.go Finished)."""
    return finished_by_conditions(jobset, succeeded=("Completed",), failed=("Failed",))


def _replicated_statuses(jobset: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    statuses = as_list(workloads.as_mapping(jobset.get("status")).get("replicatedJobsStatus"))
    return [s for s in statuses if isinstance(s, dict)]


def active(jobset: Mapping[str, Any]) -> bool:
    """Any replicated job with active Jobs (``status.replicatedJobsStatus[].active``; IsActive)."""
    return any(count_of(s.get("active"), default=0) > 0 for s in _replicated_statuses(jobset))


def pods_ready(jobset: Mapping[str, Any]) -> bool:
    """The ready and succeeded Jobs over ``status.replicatedJobsStatus`` add up to the replicas of every
    replicated job, in Jobs, not pods (jobset_controller.go PodsReady)."""
    rjobs = as_list(workloads.as_mapping(jobset.get("spec")).get("replicatedJobs"))
    replicas = sum(count_of(r.get("replicas")) for r in rjobs if isinstance(r, dict))
    done = sum(
        count_of(s.get("ready"), default=0) + count_of(s.get("succeeded"), default=0)
        for s in _replicated_statuses(jobset)
    )
    return done == replicas


def reclaimable_pods(jobset: Mapping[str, Any]) -> dict[str, int]:
    """The JobSet's reclaimable pods per pod set (replicated job), ``{}`` when none (Kueue
    jobset_controller.go ReclaimablePods): a replicated job whose ``status.replicatedJobsStatus``
    entry counts ``succeeded`` Jobs (at most its replicas) gives back that many Jobs' pods,
    ``min(parallelism, completions)`` each (PodsCountPerReplica). Malformed values count as 0
    or their default (the conversion reports them)."""
    statuses = {
        str(entry.get("name")): entry
        for entry in as_list(workloads.as_mapping(jobset.get("status")).get("replicatedJobsStatus"))
        if isinstance(entry, dict)
    }
    out: dict[str, int] = {}
    for rjob in as_list(workloads.as_mapping(jobset.get("spec")).get("replicatedJobs")):
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


#: The label the JobSet controller puts on every pod of a JobSet (jobsetapi.JobSetNameKey).
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"


def pod_label_selector(jobset: Mapping[str, Any]) -> str:
    """``jobset.sigs.k8s.io/jobset-name=<name>`` (jobset_controller.go PodLabelSelector)."""
    return f"{JOBSET_NAME_LABEL}={workloads.as_mapping(jobset.get('metadata')).get('name', '')}"


INTEGRATIONS = (
    Integration(
        framework="jobset.x-k8s.io/jobset",
        api_version=API_VERSION,
        kind="JobSet",
        plural="jobsets",
        suspend_path=("spec", "suspend"),
        pod_sets=pod_sets,
        pod_sets_field="spec.replicatedJobs",
        finished=finished,
        active=active,
        pods_ready=pods_ready,
        owner_kinds=("TrainJob",),
        pod_label_selector=pod_label_selector,
        reclaimable_pods=reclaimable_pods,
    ),
)
