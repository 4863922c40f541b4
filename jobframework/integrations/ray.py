"""KubeRay: RayJob, RayCluster and RayService (ray.io/v1).

Why this module exists: the three KubeRay kinds embed the same Ray cluster spec (a
head group and worker groups), and Kueue admits each as one Workload built from it
(pkg/controller/jobs/raycluster/common.go BuildPodSets, used by
rayjob/rayjob_controller.go and rayservice/rayservice_controller.go): pod set
``head`` (1 pod), then one per worker group, named by the lower-cased
``groupName``, with ``replicas`` (default 1) times ``numOfHosts`` pods --
``minReplicas``/``maxReplicas`` play no part (the autoscaler does not run without
elastic jobs). A RayJob adds pod set ``submitter`` (1 pod) for the Kubernetes Job
that submits it in ``K8sJobMode``. The Workload also counts what KubeRay adds to
the head pod and is not in its template: the submitter sidecar in ``SidecarMode``,
the Redis cleanup Job's requests with GCS fault tolerance, the autoscaler sidecar.

Kueue's webhooks refuse, for a managed job, what would let it outgrow its quota or
outlive it (rayjob_webhook.go, raycluster_webhook.go, common.go ValidateCreate):
in-tree autoscaling unless the job is elastic (the ElasticJobsViaWorkloadSlices
gate, which kueue-es does not have yet: such jobs are refused, as Kueue refuses
them with the gate off), more worker groups than a Workload has pod sets, a worker
group named ``head``, and for a RayJob an existing cluster (``clusterSelector``)
together with a cluster spec, no cluster spec, or ``shutdownAfterJobFinishes``
false. Here each is an ObjectRejected naming the field.

A RayJob that only selects an existing cluster is not Kueue's (JobWithSkip). A
RayCluster that a RayJob or RayService created (their controller owner reference)
is part of its owner's workload. A RayCluster or RayService never finishes.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from decimal import InvalidOperation
from typing import Any

from kueue_es.events import quantities
from kueue_es.jobframework import workloads
from kueue_es.jobframework.integrations import (
    Finished,
    Integration,
    Path,
    PodSetSource,
    condition_true,
    field_name,
    get_at,
)

API_VERSION = "ray.io/v1"
#: The head group's pod set (Kueue headGroupPodSetName); no worker group may be named so.
HEAD = "head"
#: A RayJob's submitter Job's pod set (Kueue submitterJobPodSetName).
SUBMITTER = "submitter"
#: The container KubeRay runs ``ray job submit`` in (rayutils.SubmitterContainerName).
SUBMITTER_CONTAINER = "ray-job-submitter"
#: The sidecar KubeRay adds to the head pod with in-tree autoscaling.
AUTOSCALER_CONTAINER = "autoscaler"
#: KubeRay's annotation turning GCS fault tolerance on (rayutils.RayFTEnabledAnnotationKey).
FT_ENABLED_ANNOTATION = "ray.io/ft-enabled"
#: Kueue's annotation marking an elastic job (workloadslicing.EnabledAnnotationKey).
ELASTIC_JOB_ANNOTATION = "kueue.x-k8s.io/elastic-job"
#: KubeRay's submission modes a RayJob's pod sets depend on (the CRD defaults ``submissionMode`` to the first).
K8S_JOB_MODE, SIDECAR_MODE = "K8sJobMode", "SidecarMode"

#: KubeRay's submitter container resources (ray-operator common/job.go GetDefaultSubmitterContainer).
SUBMITTER_RESOURCES = {"requests": {"cpu": "500m", "memory": "200Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
#: KubeRay's autoscaler sidecar resources when ``autoscalerOptions.resources`` is unset (common/pod.go).
AUTOSCALER_RESOURCES = {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"cpu": "500m", "memory": "512Mi"}}
#: What KubeRay's Redis cleanup Job requests; Kueue counts it in the head's Ray container (common.go).
REDIS_CLEANUP_REQUESTS = {"cpu": "200m", "memory": "256Mi"}


# -- the Ray cluster spec -----------------------------------------------------------------------------


def _mapping(ref: workloads.JobRef, value: Any, *, field: str, what: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise ref.error(field=field, problem=f"must be a mapping ({what})")
    return value


def gcs_fault_tolerance(cluster: Mapping[str, Any], annotations: Mapping[str, Any]) -> bool:
    """Whether GCS fault tolerance is on: ``gcsFaultToleranceOptions`` set, or the object's
    ``ray.io/ft-enabled`` annotation "true" in any case (KubeRay IsGCSFaultToleranceEnabled)."""
    flag = annotations.get(FT_ENABLED_ANNOTATION)
    return cluster.get("gcsFaultToleranceOptions") is not None or (isinstance(flag, str) and flag.lower() == "true")


def _max_requests(requests: Mapping[str, Any], floor: Mapping[str, str]) -> dict[str, Any]:
    """``requests`` with each resource of ``floor`` raised to it (Kueue MergeResourceListKeepMax); a value that
    does not parse is kept, for the pod set's own check to name."""
    out = dict(requests)
    for name, value in floor.items():
        current = out.get(name)
        try:
            if current is not None and quantities.parse_decimal(current) >= quantities.parse_decimal(value):
                continue
        except (ValueError, ArithmeticError, InvalidOperation):
            continue
        out[name] = value
    return out


def head_workload_template(
    ref: workloads.JobRef,
    template: Any,
    *,
    cluster: Mapping[str, Any],
    annotations: Mapping[str, Any],
    where: str,
    sidecar_submitter: bool = False,
) -> dict[str, Any] | None:
    """The head pod template the Workload counts, or None when it is the job's own (raycluster/common.go
    BuildPodSets, rayjob_controller.go addSidecarSubmitterToHeadPodSet).

    With GCS fault tolerance the first (Ray) container's requests are raised to the Redis cleanup Job's
    (:data:`REDIS_CLEANUP_REQUESTS`); with ``enableInTreeAutoscaling`` the autoscaler sidecar is added (its
    ``autoscalerOptions.resources``, else :data:`AUTOSCALER_RESOURCES`); with ``sidecar_submitter`` the
    submitter sidecar (:data:`SUBMITTER_RESOURCES`). ``where``: the template's field, for errors.
    Raises ManifestError when fault tolerance is on and the head has no container.
    """
    fault_tolerant = gcs_fault_tolerance(cluster, annotations)
    autoscaling = cluster.get("enableInTreeAutoscaling") is True
    if not (fault_tolerant or autoscaling or sidecar_submitter):
        return None
    out = copy.deepcopy(template) if isinstance(template, dict) else {}
    spec = out.get("spec")
    if not isinstance(spec, dict):
        spec = out["spec"] = {}
    containers = spec.get("containers")
    containers = list(containers) if isinstance(containers, list) else []
    if fault_tolerant:
        if not containers or not isinstance(containers[0], dict):
            raise ref.error(
                field=f"{where}.spec.containers",
                problem="must hold the Ray container: GCS fault tolerance's Redis cleanup is counted in it",
            )
        ray = copy.deepcopy(containers[0])
        resources = workloads.as_mapping(ray.get("resources"))
        requests = workloads.as_mapping(resources.get("requests"))
        ray["resources"] = {**resources, "requests": _max_requests(requests, REDIS_CLEANUP_REQUESTS)}
        containers[0] = ray
    if autoscaling:
        options = cluster.get("autoscalerOptions")
        own = options.get("resources") if isinstance(options, dict) else None
        resources = copy.deepcopy(own) if isinstance(own, dict) else copy.deepcopy(AUTOSCALER_RESOURCES)
        containers.append({"name": AUTOSCALER_CONTAINER, "resources": resources})
    if sidecar_submitter:
        containers.append({"name": SUBMITTER_CONTAINER, "resources": copy.deepcopy(SUBMITTER_RESOURCES)})
    spec["containers"] = containers
    return out


def cluster_pod_sets(
    ref: workloads.JobRef,
    job: Mapping[str, Any],
    path: Path,
    *,
    sidecar_submitter: bool = False,
) -> list[PodSetSource]:
    """The pod sets of the Ray cluster spec at ``path`` in ``job``: ``head`` (1), then one per worker group
    in spec order, named by its lower-cased ``groupName``, with ``replicas`` (default 1) times
    ``numOfHosts`` (when above 1) pods (raycluster/common.go BuildPodSets, effectiveWorkerCount).

    Refused as Kueue's webhook refuses them (common.go ValidateCreate), each a ManifestError naming the
    field: ``enableInTreeAutoscaling`` true (elastic jobs only), more than 17 worker groups, a worker
    group named ``head``; and a cluster spec that is not one (no head group, a worker group without a
    name, a count that is not a non-negative integer).
    """
    where = field_name(path)
    cluster = _mapping(ref, get_at(job, path), field=where, what="a Ray cluster spec")
    if cluster.get("enableInTreeAutoscaling") is True:
        raise ref.error(
            field=f"{where}.enableInTreeAutoscaling",
            problem=(
                "must not be true: a Kueue-managed Ray cluster may autoscale only as an elastic job "
                f"(the ElasticJobsViaWorkloadSlices feature gate and the {ELASTIC_JOB_ANNOTATION!r} annotation), "
                "which kueue-es does not support yet"
            ),
        )
    head = _mapping(ref, cluster.get("headGroupSpec"), field=f"{where}.headGroupSpec", what="the head group spec")
    groups = cluster.get("workerGroupSpecs")
    if groups is None:
        groups = []
    if not isinstance(groups, list):
        raise ref.error(field=f"{where}.workerGroupSpecs", problem="must be a list of worker group specs")
    if len(groups) + 1 > workloads.MAX_POD_SETS:
        raise ref.error(
            field=f"{where}.workerGroupSpecs",
            problem=f"has {len(groups)} worker groups; at most {workloads.MAX_POD_SETS - 1} "
            f"(with the head, a Workload holds at most {workloads.MAX_POD_SETS} pod sets)",
        )
    head_path = (*path, "headGroupSpec", "template")
    out = [
        PodSetSource(
            name=HEAD,
            count=1,
            template_path=head_path,
            workload_template=head_workload_template(
                ref,
                head.get("template"),
                cluster=cluster,
                annotations=ref.meta.get("annotations") or {},
                where=field_name(head_path),
                sidecar_submitter=sidecar_submitter,
            ),
        )
    ]
    for index, group in enumerate(groups):
        group_where = f"{where}.workerGroupSpecs[{index}]"
        group = _mapping(ref, group, field=group_where, what="a worker group spec")
        name = group.get("groupName")
        if not isinstance(name, str) or not name:
            raise ref.error(field=f"{group_where}.groupName", problem="is required")
        if name == HEAD:
            raise ref.error(field=f"{group_where}.groupName", problem=f"{HEAD!r} is reserved for the head group")
        replicas = workloads.count_field(ref, group.get("replicas"), field=f"{group_where}.replicas", default=1)
        hosts = workloads.count_field(ref, group.get("numOfHosts"), field=f"{group_where}.numOfHosts", default=1)
        out.append(
            PodSetSource(
                name=name.lower(),
                count=replicas * hosts if hosts > 1 else replicas,
                template_path=(*path, "workerGroupSpecs", index, "template"),
            )
        )
    return out


# -- RayJob -------------------------------------------------------------------------------------------


def submitter_template(job: Mapping[str, Any]) -> dict[str, Any]:
    """KubeRay's submitter pod template for a RayJob without ``submitterPodTemplate``: container
    ``ray-job-submitter`` with the head's first container's image and :data:`SUBMITTER_RESOURCES`,
    restartPolicy Never (rayjob_controller.go getSubmitterTemplate)."""
    head = workloads.as_mapping(
        workloads.as_mapping(workloads.as_mapping(job.get("spec")).get("rayClusterSpec")).get("headGroupSpec")
    )
    containers = workloads.as_mapping(workloads.as_mapping(head.get("template")).get("spec")).get("containers")
    first = containers[0] if isinstance(containers, list) and containers else None
    container: dict[str, Any] = {"name": SUBMITTER_CONTAINER}
    if isinstance(first, dict) and first.get("image"):
        container["image"] = first["image"]
    container["resources"] = copy.deepcopy(SUBMITTER_RESOURCES)
    return {"spec": {"containers": [container], "restartPolicy": "Never"}}


def rayjob_skip(job: Mapping[str, Any]) -> bool:
    """A RayJob that runs on an existing cluster (``clusterSelector``, no ``rayClusterSpec``) is not Kueue's
    (rayjob_controller.go Skip). With a cluster spec as well it is refused instead, as Kueue's webhook does."""
    spec = workloads.as_mapping(job.get("spec"))
    return bool(spec.get("clusterSelector")) and spec.get("rayClusterSpec") is None


def rayjob_pod_sets(ref: workloads.JobRef, job: Mapping[str, Any]) -> list[PodSetSource]:
    """The Ray cluster's pod sets (:func:`cluster_pod_sets` of ``spec.rayClusterSpec``), then ``submitter``
    (1 pod) in ``K8sJobMode`` -- the default when ``submissionMode`` is absent, as the CRD defaults it -- with
    ``spec.submitterPodTemplate`` or KubeRay's default (:func:`submitter_template`); in ``SidecarMode`` the
    head counts the submitter sidecar (rayjob_controller.go PodSets).

    Refused as Kueue's webhook refuses them (rayjob_webhook.go validateCreate): ``clusterSelector`` with a
    cluster spec, no ``rayClusterSpec``, ``shutdownAfterJobFinishes`` not true, and what
    :func:`cluster_pod_sets` refuses.
    """
    spec = job["spec"]
    if spec.get("clusterSelector"):
        raise ref.error(
            field="spec.clusterSelector", problem="must be empty: a Kueue-managed RayJob cannot use an existing cluster"
        )
    if spec.get("rayClusterSpec") is None:
        raise ref.error(
            field="spec.rayClusterSpec", problem="is required for a Kueue-managed RayJob without clusterSelector"
        )
    if spec.get("shutdownAfterJobFinishes") is not True:
        raise ref.error(
            field="spec.shutdownAfterJobFinishes",
            problem="must be true: a Kueue-managed RayJob deletes its cluster after finishing",
        )
    mode = spec.get("submissionMode") or K8S_JOB_MODE
    out = cluster_pod_sets(ref, job, ("spec", "rayClusterSpec"), sidecar_submitter=mode == SIDECAR_MODE)
    if mode == K8S_JOB_MODE:
        out.append(
            PodSetSource(
                name=SUBMITTER,
                count=1,
                template_path=("spec", "submitterPodTemplate"),
                default_template=submitter_template(job),
            )
        )
    return out


def _status(job: Mapping[str, Any]) -> Mapping[str, Any]:
    return workloads.as_mapping(job.get("status"))


def rayjob_finished(job: Mapping[str, Any]) -> Finished | None:
    """Finished when ``status.jobDeploymentStatus`` is ``Complete`` or ``Failed``; succeeded when
    ``status.jobStatus`` is ``SUCCEEDED``; ``status.message`` (rayjob_controller.go Finished)."""
    status = _status(job)
    if status.get("jobDeploymentStatus") not in ("Complete", "Failed"):
        return None
    return Finished(
        succeeded=status.get("jobStatus") == "SUCCEEDED",
        message=str(status.get("message") or ""),
        at=status.get("endTime"),
    )


def rayjob_active(job: Mapping[str, Any]) -> bool:
    """Pods may run unless ``status.jobDeploymentStatus`` is ``Suspended`` or new (empty) (IsActive)."""
    return _status(job).get("jobDeploymentStatus") not in (None, "", "Suspended")


def rayjob_pods_ready(job: Mapping[str, Any]) -> bool:
    """``status.rayClusterStatus.state`` is ``ready`` (rayjob_controller.go PodsReady)."""
    return workloads.as_mapping(_status(job).get("rayClusterStatus")).get("state") == "ready"


# -- RayCluster and RayService --------------------------------------------------------------------------


def raycluster_pod_sets(ref: workloads.JobRef, job: Mapping[str, Any]) -> list[PodSetSource]:
    """:func:`cluster_pod_sets` of the RayCluster's own ``spec`` (raycluster_controller.go PodSets)."""
    return cluster_pod_sets(ref, job, ("spec",))


def raycluster_ready(job: Mapping[str, Any]) -> bool:
    """``status.state`` is ``ready``: Kueue's IsActive and PodsReady of a RayCluster."""
    return _status(job).get("state") == "ready"


def rayservice_pod_sets(ref: workloads.JobRef, job: Mapping[str, Any]) -> list[PodSetSource]:
    """:func:`cluster_pod_sets` of ``spec.rayClusterConfig`` (rayservice_controller.go PodSets)."""
    return cluster_pod_sets(ref, job, ("spec", "rayClusterConfig"))


def rayservice_ready(job: Mapping[str, Any]) -> bool:
    """The ``Ready`` condition is True: Kueue's IsActive and PodsReady of a RayService."""
    return condition_true(job, "Ready") is not None


#: The label KubeRay puts on every pod of a Ray cluster: the RayCluster's name (rayutils.RayClusterLabelKey).
CLUSTER_LABEL = "ray.io/cluster"


def _cluster_selector(name: Any) -> str:
    return f"{CLUSTER_LABEL}={name}" if isinstance(name, str) and name else ""


def rayjob_pod_label_selector(job: Mapping[str, Any]) -> str:
    """``ray.io/cluster=<status.rayClusterName>``, "" before KubeRay names the cluster (PodLabelSelector)."""
    return _cluster_selector(_status(job).get("rayClusterName"))


def raycluster_pod_label_selector(job: Mapping[str, Any]) -> str:
    """``ray.io/cluster=<its name>`` (raycluster_controller.go PodLabelSelector)."""
    return _cluster_selector(workloads.as_mapping(job.get("metadata")).get("name"))


def rayservice_pod_label_selector(job: Mapping[str, Any]) -> str:
    """``ray.io/cluster=<status.activeServiceStatus.rayClusterName>``, "" before there is one (PodLabelSelector)."""
    return _cluster_selector(workloads.as_mapping(_status(job).get("activeServiceStatus")).get("rayClusterName"))


def never_finished(_: Mapping[str, Any]) -> Finished | None:
    """A RayCluster or RayService runs until deleted: Kueue's Finished is always false."""
    return None


INTEGRATIONS = (
    Integration(
        framework="ray.io/rayjob",
        api_version=API_VERSION,
        kind="RayJob",
        plural="rayjobs",
        refused_at_create=True,
        suspend_path=("spec", "suspend"),
        pod_sets=rayjob_pod_sets,
        pod_sets_field="spec.rayClusterSpec.workerGroupSpecs",
        finished=rayjob_finished,
        active=rayjob_active,
        pods_ready=rayjob_pods_ready,
        skip=rayjob_skip,
        pod_label_selector=rayjob_pod_label_selector,
    ),
    Integration(
        framework="ray.io/raycluster",
        api_version=API_VERSION,
        kind="RayCluster",
        plural="rayclusters",
        refused_at_create=True,
        suspend_path=("spec", "suspend"),
        pod_sets=raycluster_pod_sets,
        pod_sets_field="spec.workerGroupSpecs",
        finished=never_finished,
        active=raycluster_ready,
        pods_ready=raycluster_ready,
        owner_kinds=("RayJob", "RayService"),
        pod_label_selector=raycluster_pod_label_selector,
    ),
    Integration(
        framework="ray.io/rayservice",
        api_version=API_VERSION,
        kind="RayService",
        plural="rayservices",
        refused_at_create=True,
        suspend_path=("spec", "rayClusterConfig", "suspend"),
        pod_sets=rayservice_pod_sets,
        pod_sets_field="spec.rayClusterConfig.workerGroupSpecs",
        finished=never_finished,
        active=rayservice_ready,
        pods_ready=rayservice_ready,
        pod_label_selector=rayservice_pod_label_selector,
    ),
)
