"""KubeRay: RayJob, RayCluster and RayService (ray.io/v1).

Why this module exists: the three KubeRay kinds embed the same Ray cluster spec (a
head group and worker groups), and Kueue admits each as one Workload built from it
(pkg/controller/jobs/raycluster/common.go BuildPodSets, used by
rayjob/rayjob_controller.go and rayservice/rayservice_controller.go): pod set
``head`` (1 pod), then one per worker group, named by the lower-cased
``groupName``, with ``replicas`` (default 1) times ``numOfHosts`` pods --
``minReplicas``/``maxReplicas`` play no part. An elastic Ray job's worker
groups change ``replicas`` while it runs (the Ray autoscaler, or a user): the
watcher then keeps the job's workload slices (:mod:`kueue_es.jobframework.slices`),
reading a RayJob's or RayService's counts from the RayCluster KubeRay made for it
(:func:`child_cluster_counts`). A RayJob adds pod set ``submitter`` (1 pod) for the Kubernetes Job
that submits it in ``K8sJobMode``. The Workload also counts what KubeRay adds to
the head pod and is not in its template: the submitter sidecar in ``SidecarMode``,
the Redis cleanup Job's requests with GCS fault tolerance, the autoscaler sidecar.

Kueue's webhooks refuse, for a managed job, what would let it outgrow its quota or
outlive it (rayjob_webhook.go, raycluster_webhook.go, common.go ValidateCreate):
in-tree autoscaling unless the job is elastic (the ElasticJobsViaWorkloadSlices
gate on and the ``kueue.x-k8s.io/elastic-job: "true"`` annotation: :func:`autoscaling_errors`),
more worker groups than a Workload has pod sets, a worker
group named ``head``, and for a RayJob an existing cluster (``clusterSelector``)
together with a cluster spec, no cluster spec, or ``shutdownAfterJobFinishes``
false. Here each is an ObjectRejected naming the field.

A RayJob that only selects an existing cluster is not Kueue's (JobWithSkip). A
RayCluster that a RayJob or RayService created (their controller owner reference)
is part of its owner's workload. A RayCluster or RayService never finishes.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping
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
#: The scheduling gate an elastic job's pods wait behind (kueue.ElasticJobSchedulingGate).
ELASTIC_JOB_GATE = "kueue.x-k8s.io/elastic-job"
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
    field: more than 17 worker groups, a worker group named ``head``; and a cluster spec that is not one
    (no head group, a worker group without a name, a count that is not a non-negative integer).
    ``enableInTreeAutoscaling`` depends on the ElasticJobsViaWorkloadSlices gate: :func:`autoscaling_errors`.
    """
    where = field_name(path)
    cluster = _mapping(ref, get_at(job, path), field=where, what="a Ray cluster spec")
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


# -- autoscaling and elastic Ray jobs (ElasticJobsViaWorkloadSlices) --------------------------------

#: Kueue's MultiKueue controller name: a RayCluster's ``spec.managedBy`` when MultiKueue runs it elsewhere.
MULTIKUEUE_MANAGED_BY = "kueue.x-k8s.io/multikueue"
_GATE_MISSING = "an elastic job must have the ElasticJobSchedulingGate"


@dataclasses.dataclass(frozen=True, kw_only=True)
class RuleError:
    """One refusal of Kueue's Ray webhooks: ``type`` (``Invalid`` | ``Forbidden``), the ``field`` path as
    Kueue writes it, the ``value`` shown for Invalid (for a template's missing gate: its
    ``schedulingGates`` list, None when absent), and the ``detail``."""

    type: str
    field: str
    detail: str
    value: Any = None


def _cluster_spec_of(kind: str, job: Mapping[str, Any]) -> tuple[Mapping[str, Any], str]:
    """(the Ray cluster spec of a job of ``kind``, the path Kueue's messages name it by). A RayService's
    spec is at ``spec.rayClusterConfig``; Kueue's messages call it ``spec.rayClusterSpec`` (the Go field)."""
    spec = workloads.as_mapping(job.get("spec"))
    if kind == "RayCluster":
        return spec, "spec"
    if kind == "RayJob":
        return workloads.as_mapping(spec.get("rayClusterSpec")), "spec.rayClusterSpec"
    return workloads.as_mapping(spec.get("rayClusterConfig")), "spec.rayClusterSpec"


def _has_gate(template: Any) -> bool:
    gates = workloads.as_mapping(workloads.as_mapping(template).get("spec")).get("schedulingGates")
    return isinstance(gates, list) and any(isinstance(g, dict) and g.get("name") == ELASTIC_JOB_GATE for g in gates)


def autoscaling_errors(kind: str, job: Mapping[str, Any], *, elastic: bool) -> list[RuleError]:
    """What Kueue's webhook for a managed Ray job of ``kind`` refuses about autoscaling and elastic jobs.
    ``elastic``: the ElasticJobsViaWorkloadSlices gate is on and the job carries
    ``kueue.x-k8s.io/elastic-job: "true"`` (workloadslicing.Enabled).

    - RayCluster (raycluster_webhook.go validateCreate, validateElasticJob): an elastic one must have the
      elastic-job scheduling gate on its head's and each worker group's template (the mutating webhook
      puts it there, :func:`gate_templates`), and may not autoscale when MultiKueue manages it
      (``spec.managedBy: kueue.x-k8s.io/multikueue``); one that is not elastic may not set
      ``enableInTreeAutoscaling``.
    - RayJob, RayService (raycluster/common.go ValidateCreate): ``enableInTreeAutoscaling`` only when
      elastic.
    """
    cluster, where = _cluster_spec_of(kind, job)
    autoscaling = cluster.get("enableInTreeAutoscaling") is True
    out: list[RuleError] = []
    if kind == "RayCluster" and elastic:
        groups = cluster.get("workerGroupSpecs")
        for index, group in enumerate(groups if isinstance(groups, list) else []):
            template = workloads.as_mapping(group).get("template")
            if not _has_gate(template):
                gates = workloads.as_mapping(workloads.as_mapping(template).get("spec")).get("schedulingGates")
                out.append(
                    RuleError(
                        type="Invalid",
                        field=f"spec.workerGroupSpecs[{index}].template.spec.schedulingGates",
                        value=gates,
                        detail=_GATE_MISSING,
                    )
                )
        head_template = workloads.as_mapping(cluster.get("headGroupSpec")).get("template")
        if not _has_gate(head_template):
            gates = workloads.as_mapping(workloads.as_mapping(head_template).get("spec")).get("schedulingGates")
            out.append(
                RuleError(
                    type="Invalid",
                    field="spec.headGroupSpec.template.spec.schedulingGates",
                    value=gates,
                    detail=_GATE_MISSING,
                )
            )
        if autoscaling and cluster.get("managedBy") == MULTIKUEUE_MANAGED_BY:
            out.append(
                RuleError(
                    type="Forbidden",
                    field="spec.enableInTreeAutoscaling",
                    detail="in-tree autoscaling is not supported for a MultiKueue-managed elastic RayCluster",
                )
            )
    elif kind == "RayCluster" and autoscaling:
        out.append(
            RuleError(
                type="Invalid",
                field="spec.enableInTreeAutoscaling",
                value=True,
                detail="a kueue-managed RayCluster can use autoscaling only as an elastic job: enable the "
                f'ElasticJobsViaWorkloadSlices feature gate and set the "{ELASTIC_JOB_ANNOTATION}": "true" annotation',
            )
        )
    elif autoscaling and not elastic:
        out.append(
            RuleError(
                type="Invalid",
                field=f"{where}.enableInTreeAutoscaling",
                value=True,
                detail="a kueue managed job should only use autoscaling when workload slicing is enabled",
            )
        )
    return out


def check_autoscaling(kind: str) -> Callable[[workloads.JobRef, Mapping[str, Any], workloads.Context], None]:
    """The conversion's side of :func:`autoscaling_errors` for ``kind``: only the autoscaling rules (the
    gate on the templates is the webhook's own business), the first as a ManifestError naming the field."""

    def check(ref: workloads.JobRef, job: Mapping[str, Any], context: workloads.Context) -> None:
        elastic = context.elastic_jobs and (ref.meta.get("annotations") or {}).get(ELASTIC_JOB_ANNOTATION) == "true"
        actual = {"RayCluster": "spec", "RayJob": "spec.rayClusterSpec"}.get(kind, "spec.rayClusterConfig")
        for error in autoscaling_errors(kind, job, elastic=elastic):
            if error.field.endswith("enableInTreeAutoscaling"):
                raise ref.error(field=f"{actual}.enableInTreeAutoscaling", problem=error.detail)

    return check


def gate_templates(kind: str, job: dict[str, Any]) -> None:
    """What Kueue's RayCluster and RayService mutating webhooks do to an elastic job: the elastic-job
    scheduling gate on the head's and every worker group's pod template, in place, so each Ray pod waits
    for a slice holding quota for it (raycluster_webhook.go, rayservice_webhook.go Default). A RayJob's
    webhook gates nothing: KubeRay copies the RayJob's annotations onto the RayCluster it creates, whose
    webhook gates it."""
    if kind not in ("RayCluster", "RayService"):
        return
    spec = job.get("spec")
    if not isinstance(spec, dict):
        return
    cluster = spec if kind == "RayCluster" else spec.get("rayClusterConfig")
    if not isinstance(cluster, dict):
        return
    holders = [cluster.get("headGroupSpec")]
    groups = cluster.get("workerGroupSpecs")
    holders += groups if isinstance(groups, list) else []
    for holder in holders:
        if not isinstance(holder, dict):
            continue
        template = holder.setdefault("template", {})
        pod_spec = template.setdefault("spec", {}) if isinstance(template, dict) else None
        if not isinstance(pod_spec, dict):
            continue
        gates = pod_spec.setdefault("schedulingGates", [])
        if isinstance(gates, list) and not _has_gate(template):
            gates.append({"name": ELASTIC_JOB_GATE})


def child_cluster_counts(cluster: Mapping[str, Any] | None) -> dict[str, int]:
    """The worker pod counts a RayJob's or RayService's elastic workload takes from the RayCluster KubeRay
    made for it (``cluster``; None before there is one), by pod set name: a group whose ``replicas`` is set
    counts ``replicas`` times ``numOfHosts`` (raycluster/common.go UpdatePodSets, effectiveWorkerCount).
    Kueue reads them only for an elastic job with ``enableInTreeAutoscaling``; the caller checks that."""
    if cluster is None:
        return {}
    out: dict[str, int] = {}
    groups = workloads.as_mapping(cluster.get("spec")).get("workerGroupSpecs")
    for group in groups if isinstance(groups, list) else []:
        group = workloads.as_mapping(group)
        name, replicas, hosts = group.get("groupName"), group.get("replicas"), group.get("numOfHosts")
        if not isinstance(name, str) or not isinstance(replicas, int) or replicas < 0:
            continue
        out[name.lower()] = replicas * hosts if isinstance(hosts, int) and hosts > 1 else replicas
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


def rayjob_on_hold(job: Mapping[str, Any]) -> bool:
    """``status.jobDeploymentStatus`` is ``ValidationFailed``: KubeRay refused the RayJob's spec and will not
    run it, so its workload gives its quota back and waits on hold (rayjob_controller.go IsOnHold, Kueue
    #14192; before, such a workload kept its quota for good)."""
    return _status(job).get("jobDeploymentStatus") == "ValidationFailed"


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
        check_in=check_autoscaling("RayJob"),
        finished=rayjob_finished,
        active=rayjob_active,
        pods_ready=rayjob_pods_ready,
        skip=rayjob_skip,
        on_hold=rayjob_on_hold,
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
        check_in=check_autoscaling("RayCluster"),
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
        check_in=check_autoscaling("RayService"),
        finished=never_finished,
        active=rayservice_ready,
        pods_ready=rayservice_ready,
        pod_label_selector=rayservice_pod_label_selector,
    ),
)
