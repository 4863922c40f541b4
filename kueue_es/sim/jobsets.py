"""The JobSet controller's rules, pure: the child Jobs a JobSet wants, what to do with the ones it has, its status.

Why this module exists: with an emulated API server no JobSet controller runs, so an admitted JobSet
(jobset.x-k8s.io/v1alpha2) would hold its quota forever. :class:`kueue_es.sim.controllers.SimulatedControllers`
feeds each JobSet and its Jobs to :func:`sync` and writes what it returns; the Jobs then run in
:mod:`kueue_es.sim.kubelet` like any other. The rules are those of the JobSet controller v0.12.0 (the version
Kueue v0.20 builds against), pkg/controllers/jobset_controller.go and success_policy.go:

* one Job per replica of each replicated job, named ``<jobset>-<replicatedJob>-<index>``
  (placement.GenJobName), from the replicated job's template, owned by the JobSet, with the JobSet's
  labels and annotations (``jobset.sigs.k8s.io/jobset-name``, ``replicatedjob-name``, ``job-index``,
  ``job-key``, ...) on the Job and its pod template (labelAndAnnotateObject), suspended as the JobSet is;
* while the JobSet is suspended its active Jobs are suspended (suspendJobs); once it is not, each suspended
  Job gets the replicated job's pod template labels, annotations, nodeSelector, tolerations and scheduling
  gates merged in (what Kueue injected at start) and is unsuspended (resumeJob);
* ``status.replicatedJobsStatus``: per replicated job the ready, succeeded, failed, active and suspended
  Jobs (calculateReplicatedJobStatuses);
* Completed True ``AllJobsCompleted`` "jobset completed successfully" and ``terminalState: Completed`` once
  the success policy's Jobs succeeded (All: every replica of the targeted replicated jobs; Any: one);
  without a failure policy a failed Job makes it Failed True ``FailedJobs`` "jobset failed due to one or
  more job failures"; a finished JobSet's active Jobs are deleted;
* the ``Suspended`` condition: True ``SuspendedJobs`` "jobset is suspended", then False ``ResumeJobs``
  "jobset is resumed".

Not simulated: restarts and failure policies with rules or ``maxRestarts`` (a failed Job then changes
nothing), startupPolicy InOrder and dependsOn (every replicated job's Jobs are made at once), the headless
service, exclusive placement, coordinator labels, volume claim policies, TTL after finished, Events. The
sim's duration annotation ``kueue-es.dev/sim-duration-seconds`` on the JobSet goes on each child Job that
does not set its own (a convenience of the simulation, not the controller's).
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Object = dict[str, Any]

API_VERSION = "jobset.x-k8s.io/v1alpha2"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
JOBSET_UID_LABEL = "jobset.sigs.k8s.io/jobset-uid"
REPLICATED_JOB_NAME_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
REPLICATED_JOB_REPLICAS_LABEL = "jobset.sigs.k8s.io/replicatedjob-replicas"
GLOBAL_REPLICAS_LABEL = "jobset.sigs.k8s.io/global-replicas"
JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"
JOB_GLOBAL_INDEX_LABEL = "jobset.sigs.k8s.io/job-global-index"
JOB_KEY_LABEL = "jobset.sigs.k8s.io/job-key"
GROUP_NAME_LABEL = "jobset.sigs.k8s.io/group-name"
GROUP_REPLICAS_LABEL = "jobset.sigs.k8s.io/group-replicas"
JOB_GROUP_INDEX_LABEL = "jobset.sigs.k8s.io/job-group-index"
RESTARTS_LABEL = "jobset.sigs.k8s.io/restart-attempt"
#: spec.managedBy of a JobSet the built-in controller runs (absent means the same).
CONTROLLER_NAME = "jobset.sigs.k8s.io/jobset-controller"
SIM_DURATION_ANNOTATION = "kueue-es.dev/sim-duration-seconds"  # the kubelet's (kueue_es.sim.kubelet)
DEFAULT_GROUP = "default"

COMPLETED = ("Completed", "AllJobsCompleted", "jobset completed successfully")
FAILED = ("Failed", "FailedJobs", "jobset failed due to one or more job failures")
SUSPENDED = ("Suspended", "SuspendedJobs", "jobset is suspended")
RESUMED = ("Suspended", "ResumeJobs", "jobset is resumed")


@dataclass
class Sync:
    """What one pass of the JobSet controller does: Jobs to create, to delete, to patch (``(job, patch)``:
    suspend, or a resume with the merged template; ``clear_start`` names the Jobs whose ``status.startTime``
    goes first, as the Job template is immutable once started), and the JobSet's new status (whole)."""

    create: list[Object] = field(default_factory=list)
    delete: list[Object] = field(default_factory=list)
    clear_start: list[Object] = field(default_factory=list)
    patch: list[tuple[Object, Object]] = field(default_factory=list)
    status: Object = field(default_factory=dict)


def managed_here(jobset: Mapping[str, Any]) -> bool:
    """Whether the built-in controller runs ``jobset`` (no ``spec.managedBy``, or its own name): a
    MultiKueue manager's copy (``kueue.x-k8s.io/multikueue``) runs on a worker (managedByExternalController)."""
    return (jobset.get("spec") or {}).get("managedBy") in (None, "", CONTROLLER_NAME)


def _replicated_jobs(jobset: Mapping[str, Any]) -> list[Object]:
    """The replicated jobs with a name; ``replicas`` and ``groupName`` defaulted as the CRD does (1, default)."""
    out: list[Object] = []
    for rjob in (jobset.get("spec") or {}).get("replicatedJobs") or []:
        if isinstance(rjob, dict) and isinstance(rjob.get("name"), str):
            replicas = rjob.get("replicas")
            out.append(
                {
                    **rjob,
                    "replicas": replicas if isinstance(replicas, int) and replicas >= 0 else 1,
                    "groupName": rjob.get("groupName") or DEFAULT_GROUP,
                }
            )
    return out


def job_name(jobset_name: str, rjob_name: str, index: int) -> str:
    """``<jobset>-<replicatedJob>-<index>`` (jobset pkg/util/placement GenJobName)."""
    return f"{jobset_name}-{rjob_name}-{index}"


def _jobset_labels(jobset: Mapping[str, Any], rjob: Mapping[str, Any], index: int) -> dict[str, str]:
    """The labels (and, the same, annotations) the controller puts on a child Job and its pod template
    (labelAndAnnotateObject; the RestartJob gate's job-restart-attempt is off by default in v0.12.0)."""
    meta = jobset["metadata"]
    rjobs = _replicated_jobs(jobset)
    name = job_name(meta["name"], rjob["name"], index)
    before = 0
    for other in rjobs:
        if other["name"] == rjob["name"]:
            break
        before += other["replicas"]
    group = [r for r in rjobs if r["groupName"] == rjob["groupName"]]
    before_in_group = 0
    for other in group:
        if other["name"] == rjob["name"]:
            break
        before_in_group += other["replicas"]
    restarts = (jobset.get("status") or {}).get("restarts")
    return {
        JOBSET_NAME_LABEL: meta["name"],
        JOBSET_UID_LABEL: str(meta.get("uid") or ""),
        REPLICATED_JOB_NAME_LABEL: rjob["name"],
        RESTARTS_LABEL: str(restarts if isinstance(restarts, int) else 0),
        REPLICATED_JOB_REPLICAS_LABEL: str(rjob["replicas"]),
        GLOBAL_REPLICAS_LABEL: str(sum(r["replicas"] for r in rjobs)),
        JOB_INDEX_LABEL: str(index),
        # the SHA1 of "<namespace>/<job>" (jobHashKey), a stable id of the Job across restarts
        JOB_KEY_LABEL: hashlib.sha1(f"{meta.get('namespace') or ''}/{name}".encode()).hexdigest(),  # noqa: S324
        JOB_GLOBAL_INDEX_LABEL: str(before + index),
        GROUP_NAME_LABEL: rjob["groupName"],
        GROUP_REPLICAS_LABEL: str(sum(r["replicas"] for r in group)),
        JOB_GROUP_INDEX_LABEL: str(before_in_group + index),
    }


def child_job(jobset: Mapping[str, Any], rjob: Mapping[str, Any], index: int) -> Object:
    """The Job ``index`` of replicated job ``rjob`` (constructJob): the replicated job's Job template (its
    pod template as it is now, Kueue's nodeSelector and tolerations included), labelled on the Job and its
    pod template, owned by the JobSet, ``spec.suspend`` as the JobSet's."""
    meta = jobset["metadata"]
    template = copy.deepcopy(rjob.get("template") or {})
    template_meta = template.get("metadata") or {}
    spec = template.get("spec") or {}
    extra = _jobset_labels(jobset, rjob, index)
    pod_template = spec.setdefault("template", {})
    pod_meta = pod_template.setdefault("metadata", {})
    pod_meta["labels"] = {**(pod_meta.get("labels") or {}), **extra}
    pod_meta["annotations"] = {**(pod_meta.get("annotations") or {}), **extra}
    annotations = {**(template_meta.get("annotations") or {}), **extra}
    duration = (meta.get("annotations") or {}).get(SIM_DURATION_ANNOTATION)
    if duration is not None:
        annotations.setdefault(SIM_DURATION_ANNOTATION, duration)
    spec["suspend"] = bool((jobset.get("spec") or {}).get("suspend"))
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(meta["name"], rjob["name"], index),
            "namespace": meta.get("namespace"),
            "labels": {**(template_meta.get("labels") or {}), **extra},
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": jobset.get("apiVersion") or API_VERSION,
                    "kind": "JobSet",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
    }


def _finished_type(job: Mapping[str, Any]) -> str:
    """``Complete`` or ``Failed`` when that condition is True, else "" (JobFinished)."""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return str(cond["type"])
    return ""


def _suspended(job: Mapping[str, Any]) -> bool:
    return bool((job.get("spec") or {}).get("suspend"))


def _int(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) else default


def replicated_jobs_status(jobset: Mapping[str, Any], jobs: Iterable[Mapping[str, Any]]) -> list[Object]:
    """``status.replicatedJobsStatus`` from the child Jobs, in the order of ``spec.replicatedJobs``
    (calculateReplicatedJobStatuses): ``ready`` counts the active Jobs whose succeeded plus ready pods reach
    min(parallelism, completions), ``active`` those with an active pod, ``suspended`` those suspended;
    ``succeeded``/``failed`` the finished Jobs. A Job naming no replicated job of the JobSet is not counted."""
    counts = {
        r["name"]: {"name": r["name"], "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0}
        for r in _replicated_jobs(jobset)
    }
    for job in jobs:
        entry = counts.get(((job.get("metadata") or {}).get("labels") or {}).get(REPLICATED_JOB_NAME_LABEL, ""))
        if entry is None:
            continue
        finished = _finished_type(job)
        if finished == "Complete":
            entry["succeeded"] += 1
            continue
        if finished == "Failed":
            entry["failed"] += 1
            continue
        spec, status = job.get("spec") or {}, job.get("status") or {}
        pods = _int(spec.get("parallelism"), 1)
        completions = spec.get("completions")
        if isinstance(completions, int) and completions < pods:
            pods = completions
        if _int(status.get("succeeded")) + _int(status.get("ready")) >= pods:
            entry["ready"] += 1
        if _int(status.get("active")) > 0:
            entry["active"] += 1
        if _suspended(job):
            entry["suspended"] += 1
    return list(counts.values())


def _with_condition(
    conditions: Sequence[Mapping[str, Any]], kind: tuple[str, str, str], status: str, now: str
) -> list[Object]:
    """``conditions`` with one set as the controller's updateCondition does: a new status replaces the entry
    (new transition time), a new reason or message keeps its time; a False condition not there is not added."""
    ctype, reason, message = kind
    out: list[Object] = []
    found = False
    for cond in conditions:
        if cond.get("type") != ctype:
            out.append(dict(cond))
            continue
        found = True
        at = now if cond.get("status") != status else cond.get("lastTransitionTime") or now
        out.append({"type": ctype, "status": status, "reason": reason, "message": message, "lastTransitionTime": at})
    if not found and status == "True":
        out.append({"type": ctype, "status": status, "reason": reason, "message": message, "lastTransitionTime": now})
    return out


def _finished(status: Mapping[str, Any]) -> bool:
    return any(
        isinstance(c, dict) and c.get("type") in ("Completed", "Failed") and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


def _expected_successes(jobset: Mapping[str, Any]) -> tuple[int, set[str] | None]:
    """(Jobs that must succeed, the replicated jobs that count or None for all) of the success policy;
    the webhook's default is operator All over every replicated job (numJobsExpectedToSucceed)."""
    policy = (jobset.get("spec") or {}).get("successPolicy") or {}
    targets = set(policy.get("targetReplicatedJobs") or []) or None
    if policy.get("operator") == "Any":
        return 1, targets
    return sum(r["replicas"] for r in _replicated_jobs(jobset) if targets is None or r["name"] in targets), targets


def _merge_list(current: Sequence[Any], wanted: Sequence[Any]) -> list[Any]:
    """``current`` and then every item of ``wanted`` it lacks (jobset util/collections MergeSlices)."""
    out = list(current)
    out.extend(item for item in wanted if item not in out)
    return out


def resume_patch(job: Mapping[str, Any], rjob: Mapping[str, Any]) -> Object:
    """The merge patch that resumes a suspended child Job (resumeJob): the replicated job's pod template
    labels, annotations and nodeSelector merged over the Job's (its values win), its tolerations and
    scheduling gates added, and ``suspend: false`` -- so what Kueue injected into the JobSet at start
    reaches Jobs made while it was suspended. Nothing is taken away (an old flavor's key stays)."""
    pod = ((job.get("spec") or {}).get("template")) or {}
    wanted = ((rjob.get("template") or {}).get("spec") or {}).get("template") or {}
    pod_meta, wanted_meta = pod.get("metadata") or {}, wanted.get("metadata") or {}
    pod_spec, wanted_spec = pod.get("spec") or {}, wanted.get("spec") or {}
    template: Object = {
        "metadata": {
            "labels": {**(pod_meta.get("labels") or {}), **(wanted_meta.get("labels") or {})},
            "annotations": {**(pod_meta.get("annotations") or {}), **(wanted_meta.get("annotations") or {})},
        },
        "spec": {
            "nodeSelector": {**(pod_spec.get("nodeSelector") or {}), **(wanted_spec.get("nodeSelector") or {})},
            "tolerations": _merge_list(pod_spec.get("tolerations") or [], wanted_spec.get("tolerations") or []),
            "schedulingGates": _merge_list(
                pod_spec.get("schedulingGates") or [], wanted_spec.get("schedulingGates") or []
            ),
        },
    }
    # a merge patch's null removes: send no empty map or list where the Job had none
    for part in ("metadata", "spec"):
        template[part] = {k: v for k, v in template[part].items() if v or (pod.get(part) or {}).get(k) is not None}
    return {"spec": {"suspend": False, "template": template}}


def sync(jobset: Mapping[str, Any], jobs: Sequence[Mapping[str, Any]], *, now: str) -> Sync:
    """One reconcile of ``jobset`` given the Jobs it controls (``jobs``), at ``now`` (RFC 3339): see the
    module docstring for the rules (jobset_controller.go reconcile). The returned status is the JobSet's
    whole new status; nothing is returned to do for a JobSet another controller manages."""
    out = Sync(status=copy.deepcopy(dict(jobset.get("status") or {})))
    if not managed_here(jobset):
        return out
    status = out.status
    spec = jobset.get("spec") or {}
    status["replicatedJobsStatus"] = replicated_jobs_status(jobset, jobs)
    conditions = list(status.get("conditions") or [])
    active = [j for j in jobs if not _finished_type(j)]
    if _finished(status):
        out.delete = [dict(j) for j in active if not (j.get("metadata") or {}).get("deletionTimestamp")]
        return out
    failed = [j for j in jobs if _finished_type(j) == "Failed"]
    if failed:
        if not spec.get("failurePolicy"):  # with a policy (restarts, rules): not simulated, nothing changes
            status["conditions"] = _with_condition(conditions, FAILED, "True", now)
            status["terminalState"] = "Failed"
        return out
    expected, targets = _expected_successes(jobset)
    succeeded = sum(
        1
        for j in jobs
        if _finished_type(j) == "Complete"
        and (
            targets is None or ((j.get("metadata") or {}).get("labels") or {}).get(REPLICATED_JOB_NAME_LABEL) in targets
        )
    )
    if succeeded and succeeded >= expected:
        status["conditions"] = _with_condition(conditions, COMPLETED, "True", now)
        status["terminalState"] = "Completed"
        return out
    names = {(j.get("metadata") or {}).get("name") for j in jobs}
    rjobs = {r["name"]: r for r in _replicated_jobs(jobset)}
    for rjob in rjobs.values():
        for index in range(rjob["replicas"]):
            if job_name(jobset["metadata"]["name"], rjob["name"], index) not in names:
                out.create.append(child_job(jobset, rjob, index))
    if spec.get("suspend"):
        out.patch = [(dict(j), {"spec": {"suspend": True}}) for j in active if not _suspended(j)]
        status["conditions"] = _with_condition(conditions, SUSPENDED, "True", now)
    else:
        for job in active:
            owner_rjob = rjobs.get(((job.get("metadata") or {}).get("labels") or {}).get(REPLICATED_JOB_NAME_LABEL, ""))
            if owner_rjob is None or not _suspended(job):
                continue
            if (job.get("status") or {}).get("startTime"):
                out.clear_start.append(dict(job))
            out.patch.append((dict(job), resume_patch(job, owner_rjob)))
        status["conditions"] = _with_condition(conditions, RESUMED, "False", now)
    if not status["conditions"]:
        del status["conditions"]
    return out
