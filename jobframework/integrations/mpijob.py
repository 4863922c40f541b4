"""MPIJob (kubeflow.org/v2beta1, the MPI operator): pod sets ``launcher`` and ``worker``, ``spec.runPolicy.suspend``.

Why this module exists: an MPIJob runs one launcher pod (``mpirun``) and a set of
worker pods it reaches over SSH; they must start together, so Kueue admits the
MPIJob as one Workload (Kueue pkg/controller/jobs/mpijob/mpijob_controller.go).
Its replica specs are a map like the Kubeflow v1 jobs' (:mod:`.kubeflow`), but it is
served by its own operator at v2beta1 with its own status reading, and Kueue's
webhook gives the worker template a pod index offset when the launcher also works
(``runLauncherAsWorker``; mpijob_webhook.go Default).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kueue_es.jobframework import workloads
from kueue_es.jobframework.integrations import Integration, MapKey, PodSetSource, kubeflow

API_VERSION = "kubeflow.org/v2beta1"
#: The replica types Kueue makes pod sets of, in its order (orderedReplicaTypes); any other key is ignored.
REPLICA_TYPES = ("Launcher", "Worker")
#: The pod label the MPI operator puts on each replica's pods: its index (kfmpi.ReplicaIndexLabel).
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
#: Put on the worker template by Kueue's webhook when the launcher runs as worker 0 (kueue.PodIndexOffsetAnnotation).
POD_INDEX_OFFSET_ANNOTATION = "kueue.x-k8s.io/pod-index-offset"
#: A launcher template with it is in a TAS pod set group, whose offset Kueue handles elsewhere (kueue.PodSetGroupName).
POD_SET_GROUP_ANNOTATION = "kueue.x-k8s.io/podset-group-name"
#: The labels the MPI operator puts on a job's pods (kfmpi.JobNameLabel, OperatorNameLabel) and its name.
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
OPERATOR_NAME_LABEL = "training.kubeflow.org/operator-name"
OPERATOR_NAME = "mpi-operator"


def _replica_specs(ref: workloads.JobRef, job: Mapping[str, Any]) -> Mapping[str, Any]:
    specs = job["spec"].get("mpiReplicaSpecs")
    if not isinstance(specs, dict):
        raise ref.error(field="spec.mpiReplicaSpecs", problem="must be a mapping of replica types to replica specs")
    return specs


def pod_sets(ref: workloads.JobRef, job: Mapping[str, Any]) -> list[PodSetSource]:
    """``launcher`` then ``worker``, each when its replica spec is there and not null, with ``replicas`` pods
    (1 when absent) (mpijob_controller.go PodSets, orderedReplicaTypes, podsCount). Other replica types are
    not pod sets, as in Kueue. Raises ManifestError naming the replica spec's field."""
    specs = _replica_specs(ref, job)
    out: list[PodSetSource] = []
    for replica_type in REPLICA_TYPES:
        spec = specs.get(replica_type)
        if spec is None:
            continue
        where = f"spec.mpiReplicaSpecs[{replica_type}]"
        if not isinstance(spec, dict):
            raise ref.error(field=where, problem="must be a mapping (a replica spec)")
        out.append(
            PodSetSource(
                name=replica_type.lower(),
                count=workloads.count_field(ref, spec.get("replicas"), field=f"{where}.replicas", default=1),
                template_path=("spec", "mpiReplicaSpecs", MapKey(replica_type), "template"),
                pod_index_label=REPLICA_INDEX_LABEL,
            )
        )
    return out


# The MPI operator's status has the Kubeflow v1 jobs' shape (conditions Succeeded, Failed, Running;
# replicaStatuses[type].active), and Kueue reads it the same way (mpijob_controller.go Finished, IsActive,
# PodsReady): the readers are :mod:`.kubeflow`'s.
finished = kubeflow.finished
active = kubeflow.active
pods_ready = kubeflow.pods_ready


def on_create(job: dict[str, Any]) -> None:
    """Kueue's webhook with ``runLauncherAsWorker: true`` (Topology-Aware Scheduling on, Kueue's default): the
    worker template gets ``kueue.x-k8s.io/pod-index-offset: "1"`` when both replica specs are there and the
    launcher's template is not in a pod set group (mpijob_webhook.go Default)."""
    spec = workloads.as_mapping(job.get("spec"))
    specs = workloads.as_mapping(spec.get("mpiReplicaSpecs"))
    launcher, worker = specs.get("Launcher"), specs.get("Worker")
    if spec.get("runLauncherAsWorker") is not True or not isinstance(launcher, dict) or not isinstance(worker, dict):
        return
    launcher_meta = workloads.as_mapping(workloads.as_mapping(launcher.get("template")).get("metadata"))
    if POD_SET_GROUP_ANNOTATION in workloads.as_mapping(launcher_meta.get("annotations")):
        return
    template = worker.get("template")
    if template is None:
        template = worker["template"] = {}
    if not isinstance(template, dict):
        return
    meta = template.setdefault("metadata", {})
    if isinstance(meta, dict):
        annotations = meta.get("annotations")
        if not isinstance(annotations, dict):
            annotations = meta["annotations"] = {}
        annotations[POD_INDEX_OFFSET_ANNOTATION] = "1"


def pod_label_selector(job: Mapping[str, Any]) -> str:
    """``training.kubeflow.org/job-name=<name>,training.kubeflow.org/operator-name=mpi-operator`` (PodLabelSelector)."""
    name = workloads.as_mapping(job.get("metadata")).get("name", "")
    return f"{JOB_NAME_LABEL}={name},{OPERATOR_NAME_LABEL}={OPERATOR_NAME}"


INTEGRATIONS = (
    Integration(
        framework="kubeflow.org/mpijob",
        api_version=API_VERSION,
        kind="MPIJob",
        plural="mpijobs",
        suspend_path=("spec", "runPolicy", "suspend"),
        pod_sets=pod_sets,
        pod_sets_field="spec.mpiReplicaSpecs",
        finished=finished,
        active=active,
        pods_ready=pods_ready,
        # runPolicy.schedulingPolicy.priorityClass, then the launcher's, then the worker's template (PriorityClass):
        # the templates' part is the framework's, in pod set order.
        priority_class=kubeflow.priority_class,
        on_create=on_create,
        pod_label_selector=pod_label_selector,
    ),
)
