"""Kubeflow Trainer v1 jobs: PyTorchJob, TFJob, XGBoostJob, PaddleJob and JAXJob (kubeflow.org/v1).

Why this module exists: the five kinds of the (deprecated, still used) Kubeflow
training-operator share one shape -- a map of replica types to replica specs,
suspended by ``spec.runPolicy.suspend`` -- and Kueue handles them with one
adapter (pkg/controller/jobs/kubeflow/kubeflowjob/kubeflowjob_controller.go) and
one small file per kind giving the replica types' order and the map's field name
(pkg/controller/jobs/kubeflow/jobs/*). So do we: one pod set per replica type
present, in the kind's fixed order, named by the lower-cased replica type, with
``replicas`` pods (1 when absent).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kueue_es.jobframework import workloads
from kueue_es.jobframework.integrations import (
    Finished,
    Integration,
    MapKey,
    PodSetSource,
    condition_true,
    count_of,
    finished_by_conditions,
)

API_VERSION = "kubeflow.org/v1"
#: The pod label the training-operator puts on each replica's pods: its index (kftraining.ReplicaIndexLabel).
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
_SUSPEND = ("spec", "runPolicy", "suspend")


def _pod_sets(field: str, order: tuple[str, ...]) -> Any:
    """The pod set reader of a kind whose replica specs are the map ``spec.<field>``, in ``order``."""

    def pod_sets(ref: workloads.JobRef, job: Mapping[str, Any]) -> list[PodSetSource]:
        specs = job["spec"].get(field)
        if not isinstance(specs, dict):
            raise ref.error(field=f"spec.{field}", problem="must be a mapping of replica types to replica specs")
        unknown = sorted(set(specs) - set(order))
        if unknown:
            raise ref.error(
                field=f"spec.{field}[{unknown[0]}]",
                problem=f"is not a replica type; expected one of {', '.join(order)}",
            )
        out: list[PodSetSource] = []
        for replica_type in order:
            spec = specs.get(replica_type)
            if spec is None:
                continue
            where = f"spec.{field}[{replica_type}]"
            if not isinstance(spec, dict):
                raise ref.error(field=where, problem="must be a mapping (a replica spec)")
            count = workloads.count_field(ref, spec.get("replicas"), field=f"{where}.replicas", default=1)
            out.append(
                PodSetSource(
                    name=replica_type.lower(),
                    count=count,
                    template_path=("spec", field, MapKey(replica_type), "template"),
                    pod_index_label=REPLICA_INDEX_LABEL,
                )
            )
        return out

    return pod_sets


def finished(job: Mapping[str, Any]) -> Finished | None:
    """The ``Succeeded`` or ``Failed`` condition when True (kubeflowjob_controller.go Finished)."""
    return finished_by_conditions(job, succeeded=("Succeeded",), failed=("Failed",))


def active(job: Mapping[str, Any]) -> bool:
    """Any replica type with active pods in ``status.replicaStatuses`` (IsActive)."""
    statuses = workloads.as_mapping(workloads.as_mapping(job.get("status")).get("replicaStatuses"))
    return any(count_of(workloads.as_mapping(s).get("active"), default=0) > 0 for s in statuses.values())


def pods_ready(job: Mapping[str, Any]) -> bool:
    """The job's ``Running`` condition is True (kubeflowjob_controller.go PodsReady)."""
    return condition_true(job, "Running") is not None


def priority_class(job: Mapping[str, Any]) -> tuple[str, str] | None:
    """``spec.runPolicy.schedulingPolicy.priorityClass``, which wins over the templates' (PriorityClass)."""
    policy = workloads.as_mapping(workloads.as_mapping(workloads.as_mapping(job.get("spec")).get("runPolicy")))
    name = workloads.as_mapping(policy.get("schedulingPolicy")).get("priorityClass")
    return ("spec.runPolicy.schedulingPolicy.priorityClass", str(name)) if name else None


#: The labels the training-operator puts on a job's pods (kftraining.JobNameLabel, OperatorNameLabel).
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
OPERATOR_NAME_LABEL = "training.kubeflow.org/operator-name"


def _pod_label_selector(kind: str) -> Any:
    """``job-name=<name>,operator-name=<kind>-controller`` (each kind's PodLabelSelector)."""

    def selector(job: Mapping[str, Any]) -> str:
        name = workloads.as_mapping(job.get("metadata")).get("name", "")
        return f"{JOB_NAME_LABEL}={name},{OPERATOR_NAME_LABEL}={kind.lower()}-controller"

    return selector


def _kubeflow(kind: str, field: str, order: tuple[str, ...]) -> Integration:
    return Integration(
        framework=f"kubeflow.org/{kind.lower()}",
        api_version=API_VERSION,
        kind=kind,
        plural=f"{kind.lower()}s",
        suspend_path=_SUSPEND,
        pod_sets=_pod_sets(field, order),
        pod_sets_field=f"spec.{field}",
        finished=finished,
        active=active,
        pods_ready=pods_ready,
        priority_class=priority_class,
        pod_label_selector=_pod_label_selector(kind),
    )


INTEGRATIONS = (
    _kubeflow("PyTorchJob", "pytorchReplicaSpecs", ("Master", "Worker")),
    _kubeflow("TFJob", "tfReplicaSpecs", ("Chief", "Master", "PS", "Worker", "Evaluator")),
    _kubeflow("XGBoostJob", "xgbReplicaSpecs", ("Master", "Worker")),
    _kubeflow("PaddleJob", "paddleReplicaSpecs", ("Master", "Worker")),
    _kubeflow("JAXJob", "jaxReplicaSpecs", ("Worker",)),
)
