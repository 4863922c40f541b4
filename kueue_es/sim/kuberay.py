"""KubeRay's rules, pure: the pods a RayCluster wants, and what the RayJob controller does with its RayCluster,
its submitter Job and its status.

Why this module exists: with an emulated API server no KubeRay operator runs, so an admitted RayCluster would
make no pods and an admitted RayJob would never start or finish (its quota held for good).
:class:`kueue_es.sim.controllers.SimulatedControllers` feeds each RayCluster and RayJob to :func:`cluster_sync`
and :func:`rayjob_sync` and writes what they return; the submitter Job then runs in :mod:`kueue_es.sim.kubelet`
like any other. The rules are those of KubeRay's ray-operator (controllers/ray/raycluster_controller.go,
rayjob_controller.go, common/pod.go, common/job.go), enough for what Kueue reads:

* RayCluster: while it is not suspended, a head pod ``<name>-head-<5 chars>`` from the head group's template and
  per worker group ``replicas`` (default 1) times ``numOfHosts`` pods ``<name>-<group>-worker-<5 chars>``, with
  KubeRay's ``ray.io/cluster``, ``ray.io/node-type`` and ``ray.io/group`` labels; with
  ``enableInTreeAutoscaling`` the head pod gets KubeRay's ``autoscaler`` sidecar (``autoscalerOptions.resources``,
  else :data:`AUTOSCALER_RESOURCES`: BuildAutoscalerContainer); scaling in deletes gated pods first; a suspended
  RayCluster has no pods and ``state: suspended``. Status: ``desiredWorkerReplicas``, ``readyWorkerReplicas``,
  ``availableWorkerReplicas``, ``state: ready`` once the head and every wanted worker run (kept through a later
  scale-up, as KubeRay keeps it), and the ``HeadPodReady`` condition.
* RayJob: a new or resumed RayJob that is not suspended gets its RayCluster ``<name>-<5 chars>`` (the RayJob's
  labels and ``spec.rayClusterSpec``, owned by the RayJob; in ``SidecarMode`` the submitter container
  appended to the head's template) and ``jobDeploymentStatus: Initializing``; once the cluster is ready, in
  ``K8sJobMode`` (the default) the submitter Job ``<name>`` from ``spec.submitterPodTemplate`` (else KubeRay's
  default submitter) and ``Running`` with ``jobStatus: RUNNING``; the submitter Job complete (failed), it is
  ``Complete`` with ``SUCCEEDED`` (``Failed`` with ``FAILED``) and, with ``shutdownAfterJobFinishes``, its
  RayCluster is deleted. A RayJob suspended while it runs (Kueue stopping it) loses its RayCluster and
  submitter Job and is ``Suspended``; one created suspended is ``Suspended`` too. ``status.rayClusterStatus``
  follows the RayCluster's.

Not simulated: a Ray head running the entrypoint (in ``SidecarMode`` and the HTTP and interactive modes the RayJob
stays ``Running``), the Ray autoscaler (it changes no ``replicas`` here: a user's ``kubectl patch`` does),
RayService, GCS fault tolerance and its Redis cleanup Job, retries (``backoffLimit``), ``activeDeadlineSeconds``,
TTL, the head and serve Services, Events. The sim's duration annotation ``kueue-es.dev/sim-duration-seconds``
on the RayJob goes on its submitter Job (a convenience of the simulation).
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Object = dict[str, Any]

API_VERSION = "ray.io/v1"
#: KubeRay's pod labels (ray-operator utils: RayClusterLabelKey, RayNodeTypeLabelKey, RayNodeGroupLabelKey).
CLUSTER_LABEL, NODE_TYPE_LABEL, GROUP_LABEL = "ray.io/cluster", "ray.io/node-type", "ray.io/group"
#: The labels KubeRay puts on what a RayJob makes (utils.RayOriginatedFromCRDLabelKey, ...CRNameLabelKey).
ORIGINATED_FROM_CRD, ORIGINATED_FROM_NAME = "ray.io/originated-from-crd", "ray.io/originated-from-cr-name"
HEAD_GROUP = "headgroup"
#: The head pod's autoscaler sidecar (common/pod.go BuildAutoscalerContainer), its resources when
#: ``autoscalerOptions.resources`` is unset.
AUTOSCALER_CONTAINER = "autoscaler"
AUTOSCALER_RESOURCES = {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"cpu": "500m", "memory": "512Mi"}}
#: The submitter container and its resources (common/job.go GetDefaultSubmitterContainer).
SUBMITTER_CONTAINER = "ray-job-submitter"
SUBMITTER_RESOURCES = {"requests": {"cpu": "500m", "memory": "200Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
SIM_DURATION_ANNOTATION = "kueue-es.dev/sim-duration-seconds"  # the kubelet's (kueue_es.sim.kubelet)
_SAFE = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery rand.SafeEncodeString's alphabet


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _conditions_true(obj: Mapping[str, Any], kind: str) -> bool:
    conditions = _mapping(obj.get("status")).get("conditions") or []
    return any(isinstance(c, Mapping) and c.get("type") == kind and c.get("status") == "True" for c in conditions)


def _is_ready(pod: Mapping[str, Any]) -> bool:
    status = _mapping(pod.get("status"))
    conditions = status.get("conditions") or []
    ready = any(isinstance(c, Mapping) and c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    return status.get("phase") == "Running" and ready


# -- RayCluster -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Group:
    """One group of a RayCluster's pods: ``node_type`` ``head`` or ``worker``, its ``name`` (``headgroup`` or
    the worker group's ``groupName``), the pod template its pods are made from and how many it wants."""

    node_type: str
    name: str
    template: Object
    wanted: int


def autoscaler_container(cluster: Mapping[str, Any]) -> Object:
    """The ``autoscaler`` sidecar KubeRay adds to the head pod of a cluster with ``enableInTreeAutoscaling``:
    the head's first container's image, ``autoscalerOptions.resources`` or :data:`AUTOSCALER_RESOURCES`."""
    spec = _mapping(cluster.get("spec"))
    head_containers = _mapping(_mapping(_mapping(spec.get("headGroupSpec")).get("template")).get("spec")).get(
        "containers"
    )
    first = head_containers[0] if isinstance(head_containers, list) and head_containers else {}
    options = _mapping(spec.get("autoscalerOptions"))
    resources: Mapping[str, Any] = _mapping(options.get("resources")) or AUTOSCALER_RESOURCES
    container: Object = {"name": AUTOSCALER_CONTAINER, "resources": copy.deepcopy(dict(resources))}
    image = options.get("image") or _mapping(first).get("image")
    if image:
        container["image"] = image
    return container


def groups(cluster: Mapping[str, Any]) -> list[Group]:
    """The head group and each worker group (with a ``groupName``) of the RayCluster, with the pods each wants
    (none while the cluster is suspended). The head's template gets the autoscaler sidecar with in-tree
    autoscaling (:func:`autoscaler_container`); every template KubeRay's three labels."""
    name = str(_mapping(cluster.get("metadata")).get("name") or "")
    spec = _mapping(cluster.get("spec"))
    suspended = spec.get("suspend") is True
    head = copy.deepcopy(dict(_mapping(_mapping(spec.get("headGroupSpec")).get("template"))))
    if spec.get("enableInTreeAutoscaling") is True:
        pod_spec = head.setdefault("spec", {})
        containers = [c for c in pod_spec.get("containers") or [] if _mapping(c).get("name") != AUTOSCALER_CONTAINER]
        pod_spec["containers"] = [*containers, autoscaler_container(cluster)]
    out = [Group("head", HEAD_GROUP, head, 0 if suspended else 1)]
    for group in spec.get("workerGroupSpecs") or []:
        if not isinstance(group, Mapping) or not isinstance(group.get("groupName"), str):
            continue
        replicas, hosts = group.get("replicas"), group.get("numOfHosts")
        wanted = replicas if isinstance(replicas, int) and replicas >= 0 else 1
        wanted *= hosts if isinstance(hosts, int) and hosts > 1 else 1
        template = copy.deepcopy(dict(_mapping(group.get("template"))))
        out.append(Group("worker", group["groupName"], template, 0 if suspended else wanted))
    for found in out:
        labels = found.template.setdefault("metadata", {}).setdefault("labels", {})
        labels.update({CLUSTER_LABEL: name, NODE_TYPE_LABEL: found.node_type, GROUP_LABEL: found.name})
    return out


def pod_generate_name(cluster_name: str, group: Group) -> str:
    """``<cluster>-head-`` or ``<cluster>-<group>-worker-`` (common/pod.go PodName)."""
    return f"{cluster_name}-head-" if group.node_type == "head" else f"{cluster_name}-{group.name}-worker-"


def group_of(pod: Mapping[str, Any], group: Group) -> bool:
    """Whether ``pod`` is one of ``group``'s (its node type and group labels)."""
    labels = _mapping(_mapping(pod.get("metadata")).get("labels"))
    return labels.get(GROUP_LABEL) == group.name and labels.get(NODE_TYPE_LABEL) == group.node_type


def cluster_status(cluster: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], *, now: str) -> Object:
    """The fields of the RayCluster's status KubeRay writes, given its active pods: see the module docstring.
    ``now``: RFC 3339, a new condition's transition time."""
    if _mapping(cluster.get("spec")).get("suspend") is True:
        return {"state": "suspended", "readyWorkerReplicas": 0, "availableWorkerReplicas": 0}
    desired = ready_workers = 0
    head_ready = False
    for group in groups(cluster):
        ready = sum(1 for p in pods if group_of(p, group) and _is_ready(p))
        if group.node_type == "head":
            head_ready = ready >= 1
        else:
            desired += group.wanted
            ready_workers += min(ready, group.wanted)
    status: Object = {
        "desiredWorkerReplicas": desired,
        "readyWorkerReplicas": ready_workers,
        "availableWorkerReplicas": ready_workers,
    }
    previous = [c for c in _mapping(cluster.get("status")).get("conditions") or [] if isinstance(c, Mapping)]
    head = next((c for c in previous if c.get("type") == "HeadPodReady"), None)
    head_status = "True" if head_ready else "False"
    if head is None or head.get("status") != head_status:
        reason, message = ("HeadPodRunningAndReady", "") if head_ready else ("HeadPodNotFound", "Head Pod not found")
        head = {
            "type": "HeadPodReady",
            "status": head_status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": now,
        }
    status["conditions"] = [*(c for c in previous if c.get("type") != "HeadPodReady"), dict(head)]
    if head_ready and ready_workers >= desired:
        status["state"] = "ready"
    return status


# -- RayJob -----------------------------------------------------------------------------------------


@dataclass
class RayJobSync:
    """What one pass of the RayJob controller does: objects to create (a RayCluster, the submitter Job), to
    delete, and the fields of the RayJob's status to write (None: remove the field)."""

    create_cluster: Object | None = None
    create_job: Object | None = None
    delete_clusters: list[Object] = field(default_factory=list)
    delete_jobs: list[Object] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)


def cluster_name(rayjob: Mapping[str, Any]) -> str:
    """The RayCluster a RayJob gets: ``<name>-<5 chars>`` (utils.GenerateRayClusterName), the suffix a hash of
    the RayJob's UID here so that a pass made again names the same cluster."""
    meta = _mapping(rayjob.get("metadata"))
    digest = hashlib.sha256(str(meta.get("uid") or "").encode()).digest()
    return f"{meta.get('name')}-" + "".join(_SAFE[b % len(_SAFE)] for b in digest[:5])


def _owner(obj: Mapping[str, Any]) -> Object:
    meta = _mapping(obj.get("metadata"))
    return {
        "apiVersion": obj.get("apiVersion") or API_VERSION,
        "kind": obj.get("kind") or "RayJob",
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _mode(rayjob: Mapping[str, Any]) -> str:
    return str(_mapping(rayjob.get("spec")).get("submissionMode") or "K8sJobMode")


def submitter_container(rayjob: Mapping[str, Any]) -> Object:
    """KubeRay's default submitter container: the head's first container's image, :data:`SUBMITTER_RESOURCES`."""
    head = _mapping(_mapping(_mapping(rayjob.get("spec")).get("rayClusterSpec")).get("headGroupSpec"))
    containers = _mapping(_mapping(head.get("template")).get("spec")).get("containers")
    first = _mapping(containers[0]) if isinstance(containers, list) and containers else {}
    container: Object = {"name": SUBMITTER_CONTAINER, "resources": copy.deepcopy(SUBMITTER_RESOURCES)}
    if first.get("image"):
        container["image"] = first["image"]
    return container


def rayjob_cluster(rayjob: Mapping[str, Any]) -> Object:
    """The RayCluster KubeRay makes for a RayJob (rayjob_controller.go constructRayClusterForRayJob)."""
    meta = _mapping(rayjob.get("metadata"))
    spec = copy.deepcopy(dict(_mapping(_mapping(rayjob.get("spec")).get("rayClusterSpec"))))
    if _mode(rayjob) == "SidecarMode":
        head = spec.setdefault("headGroupSpec", {}).setdefault("template", {}).setdefault("spec", {})
        head["containers"] = [*(head.get("containers") or []), submitter_container(rayjob)]
    labels = {
        **dict(_mapping(meta.get("labels"))),
        ORIGINATED_FROM_CRD: "RayJob",
        ORIGINATED_FROM_NAME: str(meta.get("name") or ""),
    }
    return {
        "apiVersion": API_VERSION,
        "kind": "RayCluster",
        "metadata": {
            "name": cluster_name(rayjob),
            "namespace": meta.get("namespace"),
            "labels": labels,
            "ownerReferences": [_owner(rayjob)],
        },
        "spec": spec,
    }


def submitter_job(rayjob: Mapping[str, Any]) -> Object:
    """The submitter Job ``<name>`` of a RayJob in ``K8sJobMode`` (rayjob_controller.go createK8sJobIfNeed):
    ``spec.submitterPodTemplate`` (Kueue's injected labels and node selector on it), else KubeRay's default
    template; ``backoffLimit`` from ``submitterConfig`` (default 2)."""
    meta = _mapping(rayjob.get("metadata"))
    spec = _mapping(rayjob.get("spec"))
    template = copy.deepcopy(dict(_mapping(spec.get("submitterPodTemplate"))))
    if not template.get("spec"):
        template = {"spec": {"restartPolicy": "Never", "containers": [submitter_container(rayjob)]}}
    template.setdefault("spec", {}).setdefault("restartPolicy", "Never")
    backoff = _mapping(spec.get("submitterConfig")).get("backoffLimit")
    annotations = {}
    if duration := _mapping(meta.get("annotations")).get(SIM_DURATION_ANNOTATION):
        annotations[SIM_DURATION_ANNOTATION] = duration
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "labels": {ORIGINATED_FROM_CRD: "RayJob", ORIGINATED_FROM_NAME: str(meta.get("name") or "")},
            "annotations": annotations,
            "ownerReferences": [_owner(rayjob)],
        },
        "spec": {"backoffLimit": backoff if isinstance(backoff, int) else 2, "template": template},
    }


def _finished_type(job: Mapping[str, Any]) -> str:
    for kind in ("Complete", "Failed"):
        if _conditions_true(job, kind):
            return kind
    return ""


def rayjob_sync(
    rayjob: Mapping[str, Any], clusters: Sequence[Mapping[str, Any]], jobs: Sequence[Mapping[str, Any]], *, now: str
) -> RayJobSync:
    """One reconcile of ``rayjob`` given the RayClusters and Jobs it controls, at ``now`` (RFC 3339): see the
    module docstring for the rules."""
    out = RayJobSync()
    spec, status = _mapping(rayjob.get("spec")), _mapping(rayjob.get("status"))
    deployment = status.get("jobDeploymentStatus") or ""
    live_clusters = [c for c in clusters if not _mapping(c.get("metadata")).get("deletionTimestamp")]
    if deployment in ("Complete", "Failed"):
        if spec.get("shutdownAfterJobFinishes"):
            out.delete_clusters = [dict(c) for c in live_clusters]
        return out
    if spec.get("suspend") is True:
        out.delete_clusters = [dict(c) for c in live_clusters]
        out.delete_jobs = [dict(j) for j in jobs if not _mapping(j.get("metadata")).get("deletionTimestamp")]
        if deployment != "Suspended":
            out.status = {
                "jobDeploymentStatus": "Suspended",
                "jobStatus": None,
                "rayClusterName": None,
                "rayClusterStatus": None,
                "startTime": None,
            }
        return out
    cluster = next((c for c in live_clusters if _mapping(c.get("metadata")).get("name") == cluster_name(rayjob)), None)
    if cluster is None:
        out.create_cluster = rayjob_cluster(rayjob)
        out.status = {"jobDeploymentStatus": "Initializing", "rayClusterName": cluster_name(rayjob), "startTime": now}
        return out
    cluster_state = dict(_mapping(cluster.get("status")))
    out.status = {"rayClusterName": cluster_name(rayjob), "rayClusterStatus": cluster_state}
    if not status.get("startTime"):
        out.status["startTime"] = now
    if cluster_state.get("state") != "ready" and deployment in ("", "Initializing", "Suspended"):
        out.status["jobDeploymentStatus"] = "Initializing"
        return out
    if _mode(rayjob) != "K8sJobMode":
        out.status.update({"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"})
        return out
    submitter = next(
        (j for j in jobs if _mapping(j.get("metadata")).get("name") == _mapping(rayjob.get("metadata")).get("name")),
        None,
    )
    if submitter is None:
        out.create_job = submitter_job(rayjob)
        out.status.update({"jobDeploymentStatus": "Running", "jobStatus": "PENDING"})
        return out
    finished = _finished_type(submitter)
    if finished == "Complete":
        out.status.update({"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED", "endTime": now})
    elif finished == "Failed":
        out.status.update(
            {"jobDeploymentStatus": "Failed", "jobStatus": "FAILED", "endTime": now, "reason": "SubmissionFailed"}
        )
    else:
        out.status.update({"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"})
    return out
