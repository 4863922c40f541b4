"""The Kubeflow training operators' rules, pure: the pods a PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob or
MPIJob wants, the ones to remove, its status; and the JobSet the Trainer makes of a TrainJob, and its status.

Why this module exists: with an emulated API server no training-operator, MPI operator or Kubeflow Trainer runs,
so an admitted PyTorchJob or TrainJob would make no pods, never report Running and never finish, holding its
quota for good. :class:`kueue_es.sim.controllers.SimulatedControllers` feeds each such job and its pods (a
TrainJob: its JobSet) to :func:`sync` / :func:`sync_trainjob` and writes what they return; the pods run in the
scheduler stand-in and finish in :mod:`kueue_es.sim.kubelet` after their run time (the duration annotation the
job carries is copied onto them), the TrainJob's JobSet runs as any JobSet (:mod:`kueue_es.sim.jobsets`).

The rules, enough for what Kueue reads (kubeflowjob_controller.go and mpijob_controller.go IsActive, PodsReady,
Finished; trainjob_controller.go) and what Kueue's e2e tests check:

* a job that is not suspended (``spec.runPolicy.suspend``) and not finished gets, per replica type present
  and index below its ``replicas`` (1 when absent), a pod ``<job>-<type>-<index>`` (the type lower-cased) from
  the replica's template, owned by the job, with the operator's labels (``training.kubeflow.org/job-name``,
  ``operator-name``, ``replica-type``, ``replica-index``, ``job-role: master`` on a master, an MPIJob's ``job-role: launcher`` or ``worker``) and the
  replica's ``restartPolicy`` (``ExitCode``: Never; none: the template's, else OnFailure), unless one of that name is there
  (training-operator pkg/controller.v1/common/pod.go ReconcilePods, createNewPod);
* ``status.replicaStatuses[<Type>]``: its ``active``, ``succeeded`` and ``failed`` pods; conditions
  ``Created``, ``Running`` True once every wanted pod is running, ``Succeeded`` True once the job's deciding
  pods succeeded (the Master of a PyTorchJob, XGBoostJob or PaddleJob, the Chief or Master of a TFJob, the
  Launcher of an MPIJob; without one, every pod of the job); ``Failed`` True when one of those failed;
  ``startTime`` and ``completionTime`` (the reasons are the operator's ``<Kind>Created``, ``<Kind>Running``,
  ``<Kind>Succeeded``, ``<Kind>Failed``, ``<Kind>Suspended``, ``<Kind>Resumed``). The conditions change as the
  operators' setCondition changes them (training-operator pkg/util/status.go, the MPI operator's
  mpi_job_controller_status.go): a condition whose status or reason changes moves to the end of the list (its
  transition time kept while its status stays), one set again as it is stays where it is, ``Succeeded`` or
  ``Failed`` turns ``Running`` False in place, and once ``Failed`` is True nothing changes. So the last
  condition is the job's state, which ``kubectl get`` prints (the CRDs' STATE column reads
  ``.status.conditions[-1:].type``): ``Running`` while its pods run after a resume, ``Succeeded`` at the end;
* a suspended job's active pods are deleted; a running one gets ``Running`` False (``<Kind>Suspended``), then
  ``Suspended`` True, no active replicas and no ``startTime``; unsuspended, ``Suspended`` turns False
  (``<Kind>Resumed``; pkg/controller.v1/common/job.go);
* a finished job's pods are deleted as its ``runPolicy.cleanPodPolicy`` says (DeletePodsAndServices):
  ``Running`` its pending and running ones, ``All`` every one, ``None`` -- the operators' default when it is
  not set -- none, so those still running run to their end (a PyTorchJob's workers after its Master
  succeeded); its ``replicaStatuses`` then stay as written, those still active when it succeeded counted as
  succeeded (common/job.go ReconcileJobs);
* a TrainJob (Trainer v2) gets the JobSet Kueue's integration builds of it and its runtime
  (:func:`kueue_es.jobframework.integrations.trainjob.child_jobset`: the runtime's template with the
  ``runtimePatches`` merged in, Kueue's node selectors among them), named after it, owned by it, suspended as
  it is; when the TrainJob is unsuspended its suspended JobSet gets the replicated jobs built again, with
  Kueue's patch, and is resumed (the Trainer's JobSet builder writes the spec of a suspended JobSet); a
  suspended TrainJob suspends its JobSet; its status: ``jobsStatus`` from the
  JobSet's ``replicatedJobsStatus``, ``Suspended`` True ``Suspended`` / False ``Resumed``, and the JobSet's
  ``Completed`` (or ``Failed``) condition once True, copied as ``Complete`` (``Failed``) with its reason and
  message (Trainer pkg/controller/trainjob_controller.go, pkg/runtime/framework/plugins/jobset). The Trainer
  sets them as apimachinery's SetStatusCondition does, in place: a TrainJob that was suspended keeps its
  ``Suspended`` condition first, so ``kubectl get`` (STATE: ``.status.conditions[-1:].type``) prints
  ``Suspended`` while it runs, as with the real Trainer, and ``Complete`` once it has.

Not simulated: restarts and backoff limits, success policies other than those above, elastic PyTorchJobs,
the MPI operator's launcher Job and SSH secret (the launcher is a pod here), the services, the Trainer's
initializers' volumes and environment, ``ttlSecondsAfterFinished``, Events.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kueue_es.jobframework import workloads
from kueue_es.jobframework.integrations import trainjob as trainjob_integration

Object = dict[str, Any]

SIM_DURATION_ANNOTATION = "kueue-es.dev/sim-duration-seconds"  # the kubelet's (kueue_es.sim.kubelet)
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
OPERATOR_NAME_LABEL = "training.kubeflow.org/operator-name"
REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"


@dataclass(frozen=True)
class Kind:
    """One training kind: where its replica specs are, which replica types decide its success (the first
    present of ``deciding``; none present: every pod), and its operator's name on the pods."""

    kind: str
    api_version: str
    plural: str
    field: str
    deciding: tuple[str, ...]
    operator: str


KINDS = {
    k.kind: k
    for k in (
        Kind(
            "PyTorchJob", "kubeflow.org/v1", "pytorchjobs", "pytorchReplicaSpecs", ("Master",), "pytorchjob-controller"
        ),
        Kind("TFJob", "kubeflow.org/v1", "tfjobs", "tfReplicaSpecs", ("Chief", "Master"), "tfjob-controller"),
        Kind("XGBoostJob", "kubeflow.org/v1", "xgboostjobs", "xgbReplicaSpecs", ("Master",), "xgboostjob-controller"),
        Kind("PaddleJob", "kubeflow.org/v1", "paddlejobs", "paddleReplicaSpecs", ("Master",), "paddlejob-controller"),
        Kind("JAXJob", "kubeflow.org/v1", "jaxjobs", "jaxReplicaSpecs", (), "jaxjob-controller"),
        Kind("MPIJob", "kubeflow.org/v2beta1", "mpijobs", "mpiReplicaSpecs", ("Launcher",), "mpi-operator"),
    )
}
#: The replica types whose pods get ``job-role: master`` (the operators' IsMasterRole).
_MASTER_ROLES = ("Master", "Chief")


@dataclass
class Sync:
    """What one pass of a training operator does: pods to create and to delete, and the job's new status
    (whole); for a TrainJob, the JobSet to create (``jobset_create``) or the patch to write on it
    (``jobset_patch``)."""

    create: list[Object] = field(default_factory=list)
    delete: list[Object] = field(default_factory=list)
    status: Object = field(default_factory=dict)
    jobset_create: Object | None = None
    jobset_patch: Object | None = None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _conditions(obj: Mapping[str, Any]) -> list[Object]:
    found = _mapping(obj.get("status")).get("conditions")
    return [dict(c) for c in found if isinstance(c, Mapping)] if isinstance(found, list) else []


def _true(conditions: Iterable[Mapping[str, Any]], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def _set(conditions: list[Object], kind: str, status: str, reason: str, message: str, now: str) -> list[Object]:
    """``conditions`` with ``kind`` set in place, as apimachinery's SetStatusCondition (the Trainer's): a new
    condition is appended; its transition time kept unless its status changes."""
    out, found = [], False
    for c in conditions:
        if c.get("type") != kind:
            out.append(c)
            continue
        found = True
        if (c.get("status"), c.get("reason"), c.get("message")) == (status, reason, message):
            out.append(c)
        else:
            changed = c.get("status") != status
            stamp = now if changed else c.get("lastTransitionTime", now)
            out.append(
                {
                    "type": kind,
                    "status": status,
                    "reason": reason,
                    "message": message,
                    "lastUpdateTime": now,
                    "lastTransitionTime": stamp,
                }
            )
    if not found:
        new = {"lastUpdateTime": now, "lastTransitionTime": now}
        out.append({"type": kind, "status": status, "reason": reason, "message": message, **new})
    return out


#: The conditions only one of which a job has (filterOutCondition drops the other).
_EXCLUSIVE = {"Running": "Restarting", "Restarting": "Running"}


def _update(conditions: list[Object], kind: str, status: str, reason: str, message: str, now: str) -> list[Object]:
    """``conditions`` with ``kind`` set as the training operators' UpdateJobConditions sets it (setCondition,
    filterOutCondition: module docstring): unchanged once ``Failed`` is True, or when ``kind`` has ``status``
    and ``reason`` already (a new message alone is not written); otherwise ``kind`` taken out and appended
    last, its transition time kept when its status stays, and ``Running`` turned False where it is when
    ``kind`` is ``Succeeded`` or ``Failed``."""
    if _true(conditions, "Failed"):
        return conditions
    current = next((c for c in conditions if c.get("type") == kind), None)
    if current is not None and (current.get("status"), current.get("reason")) == (status, reason):
        return conditions
    stamp = current.get("lastTransitionTime", now) if current is not None and current.get("status") == status else now
    out = []
    for c in conditions:
        if c.get("type") in (kind, _EXCLUSIVE.get(kind)):
            continue
        if kind in ("Succeeded", "Failed") and c.get("type") == "Running":
            c = {**c, "status": "False"}
        out.append(c)
    new = {"type": kind, "status": status, "reason": reason, "message": message}
    return [*out, {**new, "lastUpdateTime": now, "lastTransitionTime": stamp}]


def _replica_specs(kind: Kind, job: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    specs = _mapping(_mapping(job.get("spec")).get(kind.field))
    return {t: s for t, s in specs.items() if isinstance(s, Mapping)}


def _replicas(spec: Mapping[str, Any]) -> int:
    value = spec.get("replicas")
    return value if isinstance(value, int) and value >= 0 else 1


def suspended(job: Mapping[str, Any]) -> bool:
    """``spec.runPolicy.suspend`` is true."""
    return _mapping(_mapping(job.get("spec")).get("runPolicy")).get("suspend") is True


def clean_pod_policy(job: Mapping[str, Any]) -> str:
    """``spec.runPolicy.cleanPodPolicy``: ``None`` (every operator's default, the training-operator's and the MPI
    operator's defaulting), ``Running`` or ``All``."""
    policy = _mapping(_mapping(job.get("spec")).get("runPolicy")).get("cleanPodPolicy")
    return policy if policy in ("Running", "All") else "None"


def cleaned_pods(job: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> list[Object]:
    """The pods of a finished ``job`` its operator deletes (DeletePodsAndServices), by its cleanPodPolicy:
    ``Running`` the pending and running ones, ``All`` every one, ``None`` none (those still running run to
    their end). A pod being deleted already is left out."""
    policy = clean_pod_policy(job)
    live = [p for p in pods if not _mapping(p.get("metadata")).get("deletionTimestamp")]
    if policy == "All":
        return [dict(p) for p in live]
    if policy == "Running":
        return [dict(p) for p in live if _phase(p) not in ("Succeeded", "Failed")]
    return []


def _phase(pod: Mapping[str, Any]) -> str:
    return str(_mapping(pod.get("status")).get("phase") or "")


def _active(pod: Mapping[str, Any]) -> bool:
    return not _mapping(pod.get("metadata")).get("deletionTimestamp") and _phase(pod) not in ("Succeeded", "Failed")


def _first_index(kind: Kind, job: Mapping[str, Any], replica_type: str) -> int:
    """The replica index of ``replica_type``'s first pod: 1 for the workers of an MPIJob that runs its launcher
    as a worker (the launcher is rank 0, so the MPI operator numbers the workers from 1, which Kueue's webhook
    matches with a ``pod-index-offset`` of 1 and its TAS e2e checks), else 0."""
    if kind.kind == "MPIJob" and replica_type == "Worker":
        return 1 if _mapping(job.get("spec")).get("runLauncherAsWorker") is True else 0
    return 0


def _replica_of(pod: Mapping[str, Any]) -> tuple[str, str]:
    labels = _mapping(_mapping(pod.get("metadata")).get("labels"))
    return str(labels.get(REPLICA_TYPE_LABEL) or ""), str(labels.get(REPLICA_INDEX_LABEL) or "")


def replica_pod(kind: Kind, job: Mapping[str, Any], replica_type: str, index: int) -> Object:
    """The pod ``<job>-<type>-<index>`` the operator makes of ``replica_type``'s template (module docstring).
    The job needs ``metadata.name`` and ``metadata.uid`` (KeyError otherwise)."""
    meta = job["metadata"]
    spec = _replica_specs(kind, job)[replica_type]
    template = _mapping(spec.get("template"))
    template_meta = _mapping(template.get("metadata"))
    labels = {
        **_mapping(template_meta.get("labels")),
        JOB_NAME_LABEL: meta["name"],
        OPERATOR_NAME_LABEL: kind.operator,
        REPLICA_TYPE_LABEL: replica_type.lower(),
        REPLICA_INDEX_LABEL: str(index),
    }
    if kind.kind == "MPIJob":
        # the MPI operator labels every pod with its role, launcher or worker (mpi_job_controller.go
        # defaultLabels), which Kueue's e2e reads a pod's rank by, not the training-operator's master role
        labels[JOB_ROLE_LABEL] = replica_type.lower()
    elif replica_type in _MASTER_ROLES:
        labels[JOB_ROLE_LABEL] = "master"
    annotations = dict(_mapping(template_meta.get("annotations")))
    duration = _mapping(meta.get("annotations")).get(SIM_DURATION_ANNOTATION)
    if duration is not None:
        annotations.setdefault(SIM_DURATION_ANNOTATION, duration)
    pod_spec = json.loads(json.dumps(_mapping(template.get("spec"))))
    restart = spec.get("restartPolicy")
    pod_spec["restartPolicy"] = (
        "Never" if restart == "ExitCode" else (restart or pod_spec.get("restartPolicy") or "OnFailure")
    )
    owner = {
        "apiVersion": job.get("apiVersion") or kind.api_version,
        "kind": kind.kind,
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{meta['name']}-{replica_type.lower()}-{index}",
            "namespace": meta.get("namespace", ""),
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner],
        },
        "spec": pod_spec,
    }


def sync(kind: Kind, job: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], *, now: str) -> Sync:
    """One pass of ``kind``'s operator over ``job`` whose pods (those it controls) are ``pods``, at ``now``
    (an RFC 3339 time): see the module docstring. The job needs ``metadata.name``/``uid`` (KeyError)."""
    out = Sync()
    pods = list(pods)
    specs = _replica_specs(kind, job)
    status = dict(_mapping(job.get("status")))
    conditions = _conditions(job)
    name = f"{_mapping(job.get('metadata')).get('namespace')}/{_mapping(job.get('metadata')).get('name')}"
    if not conditions:
        conditions = _update(
            conditions, "Created", "True", f"{kind.kind}Created", f"{kind.kind} {name} is created.", now
        )
    finished = _true(conditions, "Succeeded") or _true(conditions, "Failed")
    active = [p for p in pods if _active(p)]
    if finished:
        out.delete = cleaned_pods(job, pods)
        active = []
    elif suspended(job):
        out.delete = [dict(p) for p in active]
        active = []
    if suspended(job) and not finished:
        said = f"{kind.kind} {name} is suspended."
        if _true(conditions, "Running"):
            conditions = _update(conditions, "Running", "False", f"{kind.kind}Suspended", said, now)
        if not _true(conditions, "Suspended"):
            conditions = _update(conditions, "Suspended", "True", f"{kind.kind}Suspended", said, now)
        status.pop("startTime", None)
    elif not finished:
        if _true(conditions, "Suspended"):
            conditions = _update(
                conditions, "Suspended", "False", f"{kind.kind}Resumed", f"{kind.kind} {name} is resumed.", now
            )
        have = {_replica_of(p) for p in pods if _active(p) or _phase(p) == "Succeeded"}
        for replica_type, spec in specs.items():
            first = _first_index(kind, job, replica_type)
            for index in range(first, first + _replicas(spec)):
                if (replica_type.lower(), str(index)) not in have:
                    out.create.append(replica_pod(kind, job, replica_type, index))
        status.setdefault("startTime", now)
    replica_statuses: Object = {}
    for replica_type in specs:
        mine = [p for p in pods if _replica_of(p)[0] == replica_type.lower()]
        replica_statuses[replica_type] = {
            "active": sum(1 for p in mine if p in active),
            "succeeded": sum(1 for p in mine if _phase(p) == "Succeeded"),
            "failed": sum(1 for p in mine if _phase(p) == "Failed"),
        }
    if finished and isinstance(status.get("replicaStatuses"), Mapping):
        # a finished job's pods are no longer counted: its replica statuses stay as they were written
        replica_statuses = copy.deepcopy(dict(status["replicaStatuses"]))
    status["replicaStatuses"] = replica_statuses
    if not finished and not suspended(job):
        deciding = next((t for t in kind.deciding if t in specs), None)
        judged = [p for p in pods if deciding is None or _replica_of(p)[0] == deciding.lower()]
        wanted = sum(_replicas(specs[t]) for t in ([deciding] if deciding else specs))
        if any(_phase(p) == "Failed" for p in judged):
            message = f"{kind.kind} {name} has failed."
            conditions = _update(conditions, "Failed", "True", f"{kind.kind}Failed", message, now)
            status["completionTime"] = now
        elif wanted and sum(1 for p in judged if _phase(p) == "Succeeded") >= wanted:
            message = f"{kind.kind} {name} is successfully completed."
            conditions = _update(conditions, "Succeeded", "True", f"{kind.kind}Succeeded", message, now)
            status["completionTime"] = now
            out.delete = cleaned_pods(job, pods)
            for counts in replica_statuses.values():  # the active ones counted as succeeded (ReconcileJobs)
                counts["succeeded"] += counts["active"]
                counts["active"] = 0
        else:
            wanted_all = sum(_replicas(s) for s in specs.values())
            running = [p for p in active if _phase(p) == "Running"]
            if wanted_all and len(running) + sum(1 for p in pods if _phase(p) == "Succeeded") >= wanted_all:
                conditions = _update(
                    conditions, "Running", "True", f"{kind.kind}Running", f"{kind.kind} {name} is running.", now
                )
    status["conditions"] = conditions
    out.status = status
    return out


# -- TrainJob (Kubeflow Trainer v2) -------------------------------------------------------------------------------


def trainjob_suspended(trainjob: Mapping[str, Any]) -> bool:
    """``spec.suspend`` is true."""
    return _mapping(trainjob.get("spec")).get("suspend") is True


def trainjob_jobset(trainjob: Mapping[str, Any], runtimes: Mapping[str, Mapping[tuple[str, str], Any]]) -> Object:
    """The JobSet the Trainer makes of ``trainjob`` with its runtime from ``runtimes`` (by kind, then
    (namespace, name)): Kueue's own build of it (module docstring), owned by the TrainJob, suspended as it is,
    with its duration annotation. Raises ManifestError when the runtime is missing or bad."""
    ref = workloads.job_ref(trainjob, kind="TrainJob", api_version=trainjob_integration.API_VERSION)
    context = workloads.Context(objects=runtimes)
    child = trainjob_integration.child_jobset(ref, trainjob, context)
    meta = trainjob["metadata"]
    child["metadata"]["ownerReferences"] = [
        {
            "apiVersion": trainjob.get("apiVersion") or trainjob_integration.API_VERSION,
            "kind": "TrainJob",
            "name": meta["name"],
            "uid": meta["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    duration = _mapping(meta.get("annotations")).get(SIM_DURATION_ANNOTATION)
    if duration is not None:
        child["metadata"]["annotations"] = {SIM_DURATION_ANNOTATION: duration}
    child["spec"]["suspend"] = trainjob_suspended(trainjob)
    return child


def sync_trainjob(
    trainjob: Mapping[str, Any],
    child: Mapping[str, Any] | None,
    runtimes: Mapping[str, Mapping[tuple[str, str], Any]],
    *,
    now: str,
) -> Sync:
    """One pass of the Trainer over ``trainjob`` whose JobSet is ``child`` (None: not made yet), at ``now``:
    the JobSet to create, or the patch of its suspension (and, while suspended, of its replicated jobs), and
    the TrainJob's status (module docstring). Raises ManifestError when its runtime is missing or bad."""
    out = Sync()
    status = dict(_mapping(trainjob.get("status")))
    conditions = _conditions(trainjob)
    finished = _true(conditions, "Complete") or _true(conditions, "Failed")
    wanted = trainjob_jobset(trainjob, runtimes)
    is_suspended = trainjob_suspended(trainjob)
    if child is None:
        if not finished:
            out.jobset_create = wanted
    else:
        child_spec = _mapping(child.get("spec"))
        child_suspended = child_spec.get("suspend") is True
        if not finished and child_suspended and not is_suspended:
            # the builder writes the suspended JobSet's spec before it resumes it: Kueue's runtime patch goes in
            replicated = copy.deepcopy(wanted["spec"]["replicatedJobs"])
            out.jobset_patch = {"spec": {"suspend": False, "replicatedJobs": replicated}}
        elif not finished and is_suspended and not child_suspended:
            out.jobset_patch = {"spec": {"suspend": True}}
        child_status = _mapping(child.get("status"))
        jobs = child_status.get("replicatedJobsStatus")
        status["jobsStatus"] = [dict(j) for j in jobs if isinstance(j, Mapping)] if isinstance(jobs, list) else []
        for child_type, own_type in (("Completed", "Complete"), ("Failed", "Failed")):
            done = next((c for c in _conditions(child) if c.get("type") == child_type), None)
            if not finished and done is not None and done.get("status") == "True":
                # the JobSet's condition, renamed (the Trainer's jobset plugin Status)
                reason, message = str(done.get("reason") or ""), str(done.get("message") or "")
                conditions = _set(conditions, own_type, "True", reason, message, now)
    if is_suspended:
        conditions = _set(conditions, "Suspended", "True", "Suspended", "TrainJob is suspended", now)
    elif any(c.get("type") == "Suspended" for c in conditions):
        conditions = _set(conditions, "Suspended", "False", "Resumed", "TrainJob is resumed", now)
    status["conditions"] = conditions
    out.status = status
    return out
