"""Simulated workload controllers: Deployments, ReplicaSets, StatefulSets and LeaderWorkerSets make pods,
CronJobs make Jobs on schedule, and ungated pods run.

Why this module exists: the emulated API server has no kube-controller-manager, no
LeaderWorkerSet controller and no kubelet, so a Deployment applied to ``kueue-es demo
--keep`` would make no pods, and Kueue admits these serving kinds through their pods
(:mod:`kueue_es.jobframework.integrations.serving`). :class:`SimulatedControllers`
watches the kinds and creates and deletes pods from their templates as the real
controllers do, enough for Kueue's view of them:

* Deployment: one ReplicaSet ``<name>-<pod-template-hash>`` per template (owner
  reference to the Deployment, the ``pod-template-hash`` label; the oldest ReplicaSet of the template again
  after ``kubectl rollout undo``), numbered by ``deployment.kubernetes.io/revision``; a new template rolls out
  by the Deployment's strategy (:mod:`kueue_es.sim.deployments`: RollingUpdate's maxSurge and maxUnavailable,
  the old ReplicaSets scaled down as the new pods become Ready; or Recreate).
* ReplicaSet: pods ``<name>-<5 chars>`` up to ``replicas``; scaling in deletes gated
  (unscheduled) pods first, then not-ready ones, then the youngest (controller.ActivePods order).
* StatefulSet: pods ``<name>-<ordinal>`` from ``spec.ordinals.start`` with the
  ``apps.kubernetes.io/pod-index``, ``statefulset.kubernetes.io/pod-name`` and
  ``controller-revision-hash`` labels; ``OrderedReady`` (the default) creates the next
  ordinal only once every lower one runs and is Ready, ``Parallel`` all at once; scaling
  in deletes the highest ordinals; a new template replaces the pods from the highest ordinal down, one at
  a time (RollingUpdate; not with ``OnDelete``), down to ``rollingUpdate.partition``; the status reports
  ``currentRevision`` (the old pods' revision until the rollout completes) and ``updateRevision`` (the
  template's). A pod made again below the partition gets the template's revision (no ControllerRevision
  history is kept: the real controller makes it from the current revision's template).
* LeaderWorkerSet (leaderworkerset.x-k8s.io/v1): a leader StatefulSet ``<name>`` of
  ``replicas`` pods (the leader template, or the worker template without one), and per
  leader pod a worker StatefulSet named after it with ``size - 1`` pods from ordinal 1,
  owned by the leader pod; pods get LWS's ``leaderworkerset.sigs.k8s.io/name``,
  ``group-index``, ``worker-index``, ``group-key`` labels and ``size`` / ``leader-name``
  annotations, as LWS's pod webhook sets them, and LWS's ``template-revision-hash`` label. Both StatefulSets are
  ``Parallel``. A new template is rolled out as LWS does (:mod:`kueue_es.sim.leaderworkersets`: the leader
  StatefulSet bursts by ``maxSurge`` groups and its partition drops by ``maxUnavailable`` as the groups above it
  are ready and updated; a replaced leader gets a new worker StatefulSet). Its status counts the ready and updated
  groups and carries LWS's Available / Progressing conditions (:func:`lws_conditions`).
* CronJob: a Job at each schedule time, its status and its history limits, as kube-controller-manager's
  cronjob controller (the rules: :mod:`kueue_es.sim.cronjobs`); the controllers also wake, without any
  watch event, just after the next schedule time of any CronJob.
* RayCluster and RayJob (ray.io/v1): KubeRay's head and worker pods of a RayCluster, a RayJob's
  RayCluster and submitter Job, and their statuses (the rules: :mod:`kueue_es.sim.kuberay`).
* AppWrapper (workload.codeflare.dev/v1beta2): the AppWrapper controller's wrapped objects, created with
  Kueue's ``podSetInfos`` once it is unsuspended, and its phase and conditions (the rules:
  :mod:`kueue_es.sim.appwrappers`). Its components may be of any kind these controllers run (Job, CronJob,
  Deployment, ReplicaSet, StatefulSet, Pod, JobSet, RayCluster, RayJob, LeaderWorkerSet, the Kubeflow training
  kinds, TrainJob), each then run by its own stand-in; one of another kind (nothing would run it), whose CRD
  is not installed, or refused as invalid fails the AppWrapper (``CreateFailed``) as the AppWrapper
  controller fails one it cannot create, rather than claiming it deployed.
* JobSet (jobset.x-k8s.io/v1alpha2): the JobSet controller's child Jobs
  ``<jobset>-<replicatedJob>-<index>``, suspended and resumed with the JobSet, its
  ``replicatedJobsStatus`` and its Completed condition once its Jobs complete (the rules:
  :mod:`kueue_es.sim.jobsets`); the Jobs run in :mod:`kueue_es.sim.kubelet` as any other.
* Kubeflow training jobs (PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob, MPIJob) and TrainJob: the
  training operators' pods ``<job>-<type>-<index>``, their replica statuses and conditions, and the JobSet
  the Trainer makes of a TrainJob and its runtime (the rules: :mod:`kueue_es.sim.training`); the pods finish
  in :mod:`kueue_es.sim.kubelet`, the JobSet runs as above.
* Garbage collection: an object whose controller (one of these kinds) is gone is deleted (a CronJob's
  Jobs, a Job's pods, a RayJob's RayCluster, an AppWrapper's Deployment or PyTorchJob, ...), the background cascading deletion; an object being deleted (a foreground
  deletion waiting for its dependents) gets no new dependents. A Workload object whose owners (of these
  kinds) are all gone is deleted, one with a live owner left loses its references to the gone ones, as
  kube-controller-manager's garbage collector does with any dependent (a pod group's Workload goes with
  its last pod; a StatefulSet's, which names the StatefulSet too, stays while it is scaled to zero). As its
  attemptToDeleteItem, the dependent is read again before it is collected, and deleted only as read (UID and
  resourceVersion preconditions): what an orphaning deletion left without its owner stays, whatever order
  the watches showed the changes in.
* Pods (the scheduler and kubelet stand-in): a pod with no scheduling gate left that is not
  running is bound to a Node when there are Nodes (``spec.nodeName``: of those kube-scheduler's
  filters keep -- not cordoned, its NoSchedule/NoExecute taints tolerated, its nodeSelector and
  required node affinity matched, room for its requests (cpu, memory, extended resources such as
  ``nvidia.com/gpu``, and one of ``pods``) in the node's ``status.allocatable`` less what the active
  pods bound there request: :func:`unfit_reasons` -- the one with the fewest pods bound, pods taken by
  priority then age). A pod that fits no node stays Pending as kube-scheduler leaves it: PodScheduled
  False reason Unschedulable with its "0/N nodes are available: ..." message
  (:func:`unschedulable_message`) and one Warning ``FailedScheduling`` Event per message; every
  reconcile (a pod finishing, a Node added or changed) tries it again. With no Node at all a pod runs
  unbound at once, as before Nodes were read; a Node whose kubelet reported no capacity limits
  nothing. A bound pod gets phase Running and Ready (serving pods
  never finish here; a plain pod without a controller and a Job's pods are finished by
  :mod:`kueue_es.sim.kubelet` after its duration, which also makes a Job's pods); the status of
  each controller counts its ready pods.
* Taint eviction (kube-controller-manager's taint-eviction-controller): a bound active pod on a node with a
  NoExecute taint in ``spec.taints`` it does not tolerate is deleted at once, one that tolerates every such taint
  but some only for ``tolerationSeconds`` once the least of those has passed (:func:`noexecute_eviction_delay`);
  it first gets the DisruptionTarget condition (DeletionByTaintManager) and a TaintManagerEviction Event. The
  emulator adds no DefaultTolerationSeconds tolerations (not-ready / unreachable for 300 s) and the node
  lifecycle controller's NoExecute taints are not put on a node that is not Ready, so only the taints written on
  the Node evict (``kubectl taint node NAME key=value:NoExecute``).

Not simulated: a Deployment's minReadySeconds, progress deadline and pause, PVCs, pod failures and restarts,
LWS startup and restart policies; in the scheduler stand-in pod (anti-)affinity, topology spread, host ports,
volumes, scores other than the pod count, and preemption (it evicts no lower-priority pod to make room: its
message says no victims were found). Do not point it at a real cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import hashlib
import itertools
import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import structlog
from kubernetes_asyncio import client as k8s_client

from kueue_es.events import manifests, quantities, slices
from kueue_es.jobframework import workloads
from kueue_es.jobframework.integrations import serving
from kueue_es.services.kube import client, errors, resources
from kueue_es.services.runtime import cancel_and_wait
from kueue_es.sim import (
    appwrappers,
    cronjobs,
    custom_resources,
    deployments,
    garbage,
    jobsets,
    kuberay,
    leaderworkersets,
    store,
    training,
)

#: The pod an API refusal names (``pods "NAME" is forbidden: ...``): a retry names another, so a FailedCreate
#: Event is recorded once per what follows it.
REFUSED_POD = re.compile(r'^pods "[^"]*" ')
logger = structlog.get_logger(__name__)

LWS_REF = resources.ResourceRef(
    group="leaderworkerset.x-k8s.io",
    version="v1",
    plural="leaderworkersets",
    kind="LeaderWorkerSet",
    namespaced=True,
    status_subresource=True,
)
# The integrations' kinds, as the job integrations' registry names them (resources.ref_for).
RAYCLUSTER_REF = resources.ref_for("ray.io/v1", "RayCluster")
RAYJOB_REF = resources.ref_for("ray.io/v1", "RayJob")
APPWRAPPER_REF = resources.ref_for("workload.codeflare.dev/v1beta2", "AppWrapper")
#: The Kubeflow training kinds (:mod:`kueue_es.sim.training`), the Trainer's TrainJob and its runtimes.
TRAINING_REFS = {k.kind: resources.ref_for(k.api_version, k.kind) for k in training.KINDS.values()}
TRAINJOB_REF = resources.ref_for("trainer.kubeflow.org/v1alpha1", "TrainJob")
RUNTIME_REFS = {
    kind: resources.ref_for("trainer.kubeflow.org/v1alpha1", kind)
    for kind in ("TrainingRuntime", "ClusterTrainingRuntime")
}
#: The kinds whose CRD may be installed after the controllers start (``kubectl apply`` of the CRD).
_CRD_KINDS = (
    "LeaderWorkerSet",
    "RayCluster",
    "RayJob",
    "AppWrapper",
    "JobSet",
    "Workload",
    *TRAINING_REFS,
    "TrainJob",
    *RUNTIME_REFS,
)
#: KubeRay's pod labels (ray-operator utils: RayClusterLabelKey, RayNodeTypeLabelKey, RayNodeGroupLabelKey).
RAY_CLUSTER_LABEL, RAY_NODE_TYPE_LABEL, RAY_GROUP_LABEL = (
    kuberay.CLUSTER_LABEL,
    kuberay.NODE_TYPE_LABEL,
    kuberay.GROUP_LABEL,
)
CRD_POLL_SECONDS = 30.0
"""How long a kind whose CRD is not served waits before it is listed again when no CRD change woke it."""
POD_TEMPLATE_HASH_LABEL = "pod-template-hash"
STS_POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
REVISION_LABEL = "controller-revision-hash"
#: The annotation and label an Indexed Job's pod carries its completion index in (batch/v1 JobCompletionIndexAnnotation).
JOB_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
_SAFE = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery rand.SafeEncodeString's alphabet
_KINDS = {
    "Deployment": resources.DEPLOYMENTS,
    "ReplicaSet": resources.REPLICA_SETS,
    "StatefulSet": resources.STATEFUL_SETS,
    "Pod": resources.PODS,
    "LeaderWorkerSet": LWS_REF,
    "Job": resources.JOBS,
    "CronJob": resources.CRON_JOBS,
    "RayCluster": RAYCLUSTER_REF,
    "RayJob": RAYJOB_REF,
    "AppWrapper": APPWRAPPER_REF,
    "JobSet": resources.JOBSETS,
    "Workload": resources.WORKLOADS,  # only collected: a Workload whose owners are gone (:meth:`_collect_workloads`)
    "Node": resources.NODES,  # only read: where the scheduler stand-in binds pods (:func:`pick_node`)
    **TRAINING_REFS,
    "TrainJob": TRAINJOB_REF,
    **RUNTIME_REFS,  # only read: what a TrainJob's JobSet is built of
}
_OWNER_API = {
    "Deployment": "apps/v1",
    "ReplicaSet": "apps/v1",
    "StatefulSet": "apps/v1",
    "Pod": "v1",
    "Job": "batch/v1",
    "CronJob": "batch/v1",
}
_OWNER_API["LeaderWorkerSet"] = LWS_REF.api_version
_OWNER_API["RayCluster"] = RAYCLUSTER_REF.api_version
_OWNER_API["RayJob"] = RAYJOB_REF.api_version
_OWNER_API["AppWrapper"] = APPWRAPPER_REF.api_version
#: The kinds an AppWrapper's components may be of here: those the simulated controllers run. A component of
#: another kind fails its AppWrapper (CreateFailed: :func:`appwrappers.not_simulated`), as it would deploy nothing.
_COMPONENT_KINDS = (
    "Job",
    "CronJob",
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "Pod",
    "JobSet",
    "RayCluster",
    "RayJob",
    "LeaderWorkerSet",
    *TRAINING_REFS,
    "TrainJob",
)
#: The kinds whose objects the garbage collector deletes once their controller (of a kind here) is gone: what the
#: simulated controllers make, an AppWrapper's components among them.
_COLLECTED = tuple(
    dict.fromkeys(("Deployment", "ReplicaSet", "StatefulSet", "Job", "JobSet", "RayCluster", "Pod", *_COMPONENT_KINDS))
)
#: The kinds of the Ray stand-in (off with ``ray=False``).
_RAY_KINDS = ("RayCluster", "RayJob")
_OWNER_API["JobSet"] = resources.JOBSETS.api_version

Object = dict[str, Any]
Key = tuple[str, str]


# -- pure helpers -----------------------------------------------------------------------------------


def safe_hash(value: Any, length: int = 10) -> str:
    """A short stable hash of ``value`` (its JSON) in Kubernetes' safe alphabet, as a pod-template-hash looks."""
    digest = hashlib.sha256(json.dumps(value, sort_keys=True).encode()).digest()
    return "".join(_SAFE[b % len(_SAFE)] for b in digest[:length])


def owner_ref(obj: Mapping[str, Any], *, block: bool = True) -> Object:
    """The controller owner reference Kubernetes' controllers put on what they create."""
    meta = obj["metadata"]
    return {
        "apiVersion": obj.get("apiVersion") or _OWNER_API[str(obj.get("kind"))],
        "kind": obj.get("kind"),
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": block,
    }


def controller_uid(obj: Mapping[str, Any]) -> str:
    """The UID of the object's controller (``ownerReferences`` with ``controller: true``), or ""."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller"):
            return str(ref.get("uid") or "")
    return ""


def is_gated(pod: Mapping[str, Any]) -> bool:
    """Whether a scheduling gate still holds the pod."""
    return bool((pod.get("spec") or {}).get("schedulingGates"))


def is_ready(pod: Mapping[str, Any]) -> bool:
    """Phase Running and the Ready condition True."""
    status = pod.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    return status.get("phase") == "Running" and ready


def is_active(pod: Mapping[str, Any]) -> bool:
    """Not being deleted and not terminated (controller.IsPodActive)."""
    phase = (pod.get("status") or {}).get("phase")
    return not (pod.get("metadata") or {}).get("deletionTimestamp") and phase not in ("Succeeded", "Failed")


def _replicas(obj: Mapping[str, Any]) -> int:
    value = (obj.get("spec") or {}).get("replicas")
    return value if isinstance(value, int) and value >= 0 else 1


def _size(lws: Mapping[str, Any]) -> int:
    """A LeaderWorkerSet's pods per group (``spec.leaderWorkerTemplate.size``, default 1)."""
    size = ((lws.get("spec") or {}).get("leaderWorkerTemplate") or {}).get("size")
    return size if isinstance(size, int) and size >= 1 else 1


def _template(obj: Mapping[str, Any], *path: str) -> Object:
    node: Any = obj.get("spec") or {}
    for step in path or ("template",):
        node = node.get(step) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else {}


def pod_from_template(template: Mapping[str, Any], *, namespace: str, owner: Mapping[str, Any]) -> Object:
    """A pod body from a pod template: its labels, annotations and spec, owned by ``owner``."""
    meta = template.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "namespace": namespace,
            "labels": dict(meta.get("labels") or {}),
            "annotations": dict(meta.get("annotations") or {}),
            "ownerReferences": [owner_ref(owner)],
        },
        "spec": json.loads(json.dumps(template.get("spec") or {})),
    }


def job_pod(job: Mapping[str, Any], *, index: int | None = None) -> Object:
    """A pod of batch/v1 Job ``job`` as Kubernetes' Job controller creates it (pkg/controller/job
    job_controller.go manageJob, indexed_job_utils.go): the template's labels, annotations and spec (the
    API server put ``batch.kubernetes.io/controller-uid``, ``batch.kubernetes.io/job-name``,
    ``controller-uid`` and ``job-name`` on the template at create, :mod:`.strategies`; Kueue's nodeSelector,
    tolerations and scheduling gates are there once it unsuspended the Job), a controller owner reference
    to the Job, and ``generateName`` ``<job>-`` -- or, for completion ``index`` of an Indexed Job,
    ``<job>-<index>-`` with the ``batch.kubernetes.io/job-completion-index`` annotation and label, the
    hostname ``<job>-<index>`` unless the template names one, and ``JOB_COMPLETION_INDEX`` in each
    container's environment. The Job needs ``metadata.name`` and ``metadata.uid`` (KeyError otherwise)."""
    meta = job["metadata"]
    owner = {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta}
    pod = pod_from_template(_template(job), namespace=str(meta.get("namespace") or ""), owner=owner)
    if index is None:
        pod["metadata"]["generateName"] = f"{meta['name']}-"
        return pod
    pod["metadata"]["generateName"] = f"{meta['name']}-{index}-"
    pod["metadata"]["annotations"][JOB_COMPLETION_INDEX] = str(index)
    pod["metadata"]["labels"][JOB_COMPLETION_INDEX] = str(index)
    pod["spec"].setdefault("hostname", f"{meta['name']}-{index}")
    index_env = {
        "name": "JOB_COMPLETION_INDEX",
        "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{JOB_COMPLETION_INDEX}']"}},
    }
    for key in ("initContainers", "containers"):
        for container in pod["spec"].get(key) or []:
            if isinstance(container, dict) and not any(
                isinstance(e, dict) and e.get("name") == "JOB_COMPLETION_INDEX" for e in container.get("env") or []
            ):
                container["env"] = [*(container.get("env") or []), index_env]
    return pod


#: kube-scheduler's reasons for a node it filtered out (pkg/scheduler/framework/plugins: nodeunschedulable
#: ErrReasonUnschedulable, nodeaffinity ErrReasonPod, noderesources "Too many pods" / "Insufficient <name>"; the
#: tainttoleration reason names the taint), and its FitError wording (framework/types.go NoNodeAvailableMsg,
#: preemption.go: nodes the preemption cannot help, and those with no victims).
REASON_UNSCHEDULABLE_NODE = "node(s) were unschedulable"
REASON_NODE_SELECTOR = "node(s) didn't match Pod's node affinity/selector"
REASON_TOO_MANY_PODS = "Too many pods"
PREEMPTION_NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_PREEMPTION_VICTIMS = "No preemption victims found for incoming pod"
#: The taint a cordoned node carries (k8s.io/api core/v1 TaintNodeUnschedulable), which a pod may tolerate.
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"


def _tolerated(taint: Mapping[str, Any], tolerations: Iterable[Any]) -> bool:
    """Whether one of ``tolerations`` tolerates ``taint`` (k8s.io/api core/v1 Toleration.ToleratesTaint)."""
    for toleration in tolerations:
        if not isinstance(toleration, dict):
            continue
        if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
            continue
        if toleration.get("key") and toleration.get("key") != taint.get("key"):
            continue
        if toleration.get("operator") == "Exists" or toleration.get("value", "") == taint.get("value", ""):
            return True
    return False


def _toleration_for(taint: Mapping[str, Any], tolerations: Iterable[Any]) -> Mapping[str, Any] | None:
    """The first of ``tolerations`` that tolerates ``taint`` (:func:`_tolerated`), or None."""
    for toleration in tolerations:
        if isinstance(toleration, dict) and _tolerated(taint, [toleration]):
            return toleration
    return None


#: The taint-eviction controller's DisruptionTarget condition and Event (kubernetes
#: pkg/controller/tainteviction/taint_eviction.go addConditionAndDeletePod, emitPodDeletionEvent).
TAINT_EVICTION_REASON = "DeletionByTaintManager"
TAINT_EVICTION_MESSAGE = "Taint manager: deleting due to NoExecute taint"
TAINT_EVICTION_EVENT = "TaintManagerEviction"
TAINT_EVICTION_COMPONENT = "taint-eviction-controller"


def noexecute_eviction_delay(pod: Mapping[str, Any], node: Mapping[str, Any]) -> float | None:
    """When Kubernetes' taint-eviction controller deletes ``pod``, bound to ``node``, for the node's NoExecute
    taints (pkg/controller/tainteviction/taint_eviction.go processPodOnNode, getMinTolerationTime, with
    v1helper.GetMatchingTolerations): None when it stays (the node has no NoExecute taint, or the pod tolerates
    each of them with a toleration without ``tolerationSeconds``); 0 at once (a taint it does not tolerate, or a
    matching toleration with ``tolerationSeconds`` <= 0); else the least ``tolerationSeconds`` of the matching
    tolerations, counted from when the controller first saw the pod due. Only the taints in ``spec.taints``
    count: the emulator puts no ``node.kubernetes.io/not-ready`` / ``unreachable`` NoExecute taint on a node
    that is not Ready (the node lifecycle controller's), and adds no DefaultTolerationSeconds tolerations."""
    taints = [
        t
        for t in (node.get("spec") or {}).get("taints") or []
        if isinstance(t, dict) and t.get("effect") == "NoExecute"
    ]
    if not taints:
        return None
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    used = []
    for taint in taints:
        toleration = _toleration_for(taint, tolerations)
        if toleration is None:
            return 0.0
        used.append(toleration)
    bounds = [int(seconds) for t in used if (seconds := t.get("tolerationSeconds")) is not None]
    if not bounds:
        return None
    return float(max(min(bounds), 0))


def _matches_requirement(requirement: Any, values: Mapping[str, str]) -> bool:
    """One NodeSelectorRequirement (``key``, ``operator``, ``values``) against a node's labels or fields
    (k8s.io/component-helpers nodeaffinity: In, NotIn, Exists, DoesNotExist, Gt, Lt)."""
    if not isinstance(requirement, dict):
        return False
    key, operator = requirement.get("key"), requirement.get("operator")
    wanted = [str(v) for v in requirement.get("values") or []]
    present = key in values
    value = values.get(str(key), "")
    if operator == "In":
        return present and value in wanted
    if operator == "NotIn":
        return not present or value not in wanted
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and len(wanted) == 1:
        try:
            have, bound = int(value), int(wanted[0])
        except ValueError:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False


def _matches_affinity(spec: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """Whether ``node`` matches the pod's ``nodeSelector`` and its required node affinity: any of the
    ``nodeSelectorTerms``, each term all of its ``matchExpressions`` (on labels) and ``matchFields`` (only
    ``metadata.name``), a term with neither matching nothing (nodeaffinity plugin, component-helpers)."""
    meta = node.get("metadata") or {}
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    if any(labels.get(key) != value for key, value in (spec.get("nodeSelector") or {}).items()):
        return False
    affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if not isinstance(affinity, dict):
        return True
    fields = {"metadata.name": str(meta.get("name", ""))}
    for term in affinity.get("nodeSelectorTerms") or []:
        if not isinstance(term, dict):
            continue
        expressions, match_fields = term.get("matchExpressions") or [], term.get("matchFields") or []
        if not expressions and not match_fields:
            continue
        if all(_matches_requirement(r, labels) for r in expressions) and all(
            _matches_requirement(r, fields) for r in match_fields
        ):
            return True
    return False


def node_allocatable(node: Mapping[str, Any]) -> dict[str, int] | None:
    """What ``node`` offers pods: its ``status.allocatable`` (else ``status.capacity``, as a kubelet reports
    both) as integer amounts (cpu in millicores, memory in bytes, ``pods`` and extended resources such as
    ``nvidia.com/gpu`` in units: :func:`kueue_es.events.quantities.to_amount`); None for a Node whose kubelet
    reported neither, which the scheduler stand-in does not limit (as before it read resources). A quantity that
    does not parse counts as 0."""
    status = node.get("status") or {}
    offered = status.get("allocatable") or status.get("capacity")
    if not isinstance(offered, dict) or not offered:
        return None
    out: dict[str, int] = {}
    for resource, value in offered.items():
        try:
            out[str(resource)] = quantities.to_amount(str(resource), value)
        except quantities.QuantityError:
            out[str(resource)] = 0
    return out


def pod_requests(pod: Mapping[str, Any]) -> dict[str, int]:
    """The requests kube-scheduler fits ``pod`` with (noderesources computePodResourceRequest): the containers'
    sum, at least each init container's, sidecars and ``overhead`` added (:func:`kueue_es.events.manifests.
    pod_requests`), as integer amounts; zero amounts left out. Raises ManifestError naming the pod's field of
    a bad quantity."""
    meta = pod.get("metadata") or {}
    requests = manifests.pod_requests(
        dict(pod.get("spec") or {}), where="spec", kind="Pod", name=f"{meta.get('namespace')}/{meta.get('name')}"
    )
    return {resource: amount for resource, amount in requests.items() if amount > 0}


def node_used(pods: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """What the pods bound to each node take of it: node name -> the summed :func:`pod_requests` of its active
    pods (bound by ``spec.nodeName``, neither Succeeded nor Failed nor being deleted: :func:`is_active`) and their
    count under ``pods``. A pod whose requests do not parse counts as a pod only."""
    used: dict[str, dict[str, int]] = {}
    for pod in pods:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not node_name or not is_active(pod):
            continue
        on_node = used.setdefault(str(node_name), {})
        on_node["pods"] = on_node.get("pods", 0) + 1
        try:
            requests = pod_requests(pod)
        except manifests.ManifestError:
            continue
        for resource, amount in requests.items():
            on_node[resource] = on_node.get(resource, 0) + amount
    return used


def unfit_reasons(
    pod: Mapping[str, Any],
    node: Mapping[str, Any],
    used: Mapping[str, int] | None = None,
    *,
    requests: Mapping[str, int] | None = None,
) -> tuple[list[str], bool]:
    """Why kube-scheduler's filters leave ``node`` out for ``pod``: ``(reasons, resolvable)``, no reasons when
    it fits. The filters run in the default profile's order, the first failing one giving the reasons
    (framework RunFilterPlugins): NodeUnschedulable (a cordoned node, unless the pod tolerates
    ``node.kubernetes.io/unschedulable:NoSchedule``), TaintToleration (the first NoSchedule or NoExecute taint not
    tolerated: "node(s) had untolerated taint {key: value}"), NodeAffinity (``nodeSelector`` and required node
    affinity), then NodeResourcesFit: "Too many pods" when the node's ``pods`` allocatable is taken, and
    "Insufficient <resource>" for each resource the pod requests (``requests``, else :func:`pod_requests`) beyond
    the node's allocatable (:func:`node_allocatable`) less ``used`` (what its pods take: :func:`node_used`); a
    resource the node does not offer has 0. ``resolvable`` is False for the reasons preemption cannot help (all
    but the resources'). Raises ManifestError for a bad quantity in the pod."""
    spec, node_spec = pod.get("spec") or {}, node.get("spec") or {}
    tolerations = spec.get("tolerations") or []
    if node_spec.get("unschedulable") and not _tolerated(
        {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}, tolerations
    ):
        return [REASON_UNSCHEDULABLE_NODE], False
    for taint in [*(node_spec.get("taints") or []), *_lifecycle_taints(node)]:
        if isinstance(taint, dict) and taint.get("effect") in ("NoSchedule", "NoExecute"):
            if not _tolerated(taint, tolerations):
                return [f"node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value', '')}}}"], False
    if not _matches_affinity(spec, node):
        return [REASON_NODE_SELECTOR], False
    allocatable = node_allocatable(node)
    if allocatable is None:
        return [], True
    used = used or {}
    reasons = []
    if used.get("pods", 0) + 1 > allocatable.get("pods", 0):
        reasons.append(REASON_TOO_MANY_PODS)
    wanted = pod_requests(pod) if requests is None else requests
    for resource, amount in sorted(wanted.items()):
        if amount > 0 and amount > allocatable.get(resource, 0) - used.get(resource, 0):
            reasons.append(f"Insufficient {resource}")
    return reasons, True


def fits_node(pod: Mapping[str, Any], node: Mapping[str, Any], used: Mapping[str, int] | None = None) -> bool:
    """Whether the scheduler stand-in may bind ``pod`` to ``node`` (:func:`unfit_reasons` gives none): not
    cordoned, its NoSchedule/NoExecute taints tolerated, its labels matching the pod's ``nodeSelector`` and
    required node affinity, and room for the pod's requests in its allocatable less ``used`` (what the pods
    bound to it take: :func:`node_used`; nothing when None). Pod (anti-)affinity, topology spread and host ports
    are not looked at. Raises ManifestError for a bad quantity in the pod."""
    return not unfit_reasons(pod, node, used)[0]


def pick_node(
    pod: Mapping[str, Any], nodes: Iterable[Mapping[str, Any]], used: Mapping[str, Mapping[str, int]]
) -> str | None:
    """The node the scheduler stand-in binds ``pod`` to: of the nodes it fits (:func:`fits_node`, given ``used``:
    node name -> what its pods take, :func:`node_used`), the one with the fewest pods bound (``used[name]["pods"]``),
    then the first by name, so pods spread; None when no node fits or there are none (the caller tells those apart:
    with no Node at all a pod runs unbound). Raises ManifestError for a bad quantity in the pod."""
    requests = pod_requests(pod)
    fitting = [
        str(n["metadata"]["name"])
        for n in nodes
        if not unfit_reasons(pod, n, used.get(str(n["metadata"]["name"])), requests=requests)[0]
    ]
    return min(fitting, key=lambda name: (used.get(name, {}).get("pods", 0), name), default=None)


def _lifecycle_taints(node: Mapping[str, Any]) -> list[dict[str, str]]:
    """The taint the node lifecycle controller puts on a node whose Ready condition is False
    (``node.kubernetes.io/not-ready:NoSchedule``) or Unknown (``node.kubernetes.io/unreachable:NoSchedule``), so
    kube-scheduler binds no new pod there (kube-controller-manager nodelifecycle, TaintNodesByCondition). The
    emulator does not write it on the Node; a node without a Ready condition (many a test's) gets none."""
    for condition in (node.get("status") or {}).get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == "Ready":
            status = condition.get("status")
            if status == "False":
                return [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]
            if status == "Unknown":
                return [{"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}]
    return []


def unschedulable_message(
    pod: Mapping[str, Any], nodes: Iterable[Mapping[str, Any]], used: Mapping[str, Mapping[str, int]]
) -> str:
    """The message kube-scheduler writes (PodScheduled False reason Unschedulable, and the FailedScheduling
    Event) for ``pod`` that fits none of ``nodes`` (framework FitError.Error): "0/N nodes are available: " and
    each reason counted over the nodes (:func:`unfit_reasons`), sorted, then what the default preemption found:
    "preemption: 0/N nodes are available: " with "Preemption is not helpful for scheduling" counted for the nodes
    left out for reasons preemption cannot change and "No preemption victims found for incoming pod" for the
    others (the stand-in preempts no pod), or "preemption: not eligible due to preemptionPolicy=Never." E.g.
    ``0/8 nodes are available: 8 Insufficient cpu. preemption: 0/8 nodes are available: 8 No preemption victims
    found for incoming pod.`` Raises ManifestError for a bad quantity in the pod."""
    nodes = list(nodes)
    requests = pod_requests(pod)
    reasons: dict[str, int] = {}
    preemption: dict[str, int] = {}
    for node in nodes:
        found, resolvable = unfit_reasons(pod, node, used.get(str(node["metadata"]["name"])), requests=requests)
        for reason in found:
            reasons[reason] = reasons.get(reason, 0) + 1
        outcome = NO_PREEMPTION_VICTIMS if resolvable else PREEMPTION_NOT_HELPFUL
        preemption[outcome] = preemption.get(outcome, 0) + 1

    def histogram(counts: Mapping[str, int]) -> str:
        return ", ".join(sorted(f"{count} {reason}" for reason, count in counts.items()))

    message = f"0/{len(nodes)} nodes are available: {histogram(reasons)}."
    if (pod.get("spec") or {}).get("preemptionPolicy") == "Never":
        return f"{message} preemption: not eligible due to preemptionPolicy=Never."
    return f"{message} preemption: 0/{len(nodes)} nodes are available: {histogram(preemption)}."


#: kube-scheduler's reason for a pod it cannot place (k8s.io/api core/v1 PodReasonUnschedulable), the Event reason
#: it records then (schedule_one.go handleSchedulingFailure) and its name as an Event's source.
UNSCHEDULABLE_REASON = "Unschedulable"
FAILED_SCHEDULING = "FailedScheduling"
SCHEDULER_NAME = "default-scheduler"


def scheduling_event(pod: Mapping[str, Any], *, message: str, now: datetime.datetime, serial: int = 0) -> Object:
    """The core v1 Event kube-scheduler records about ``pod`` (a stored Pod: ``metadata.name``, ``namespace``,
    ``uid``) that fits no node: Warning ``FailedScheduling`` with ``message`` (:func:`unschedulable_message`),
    reported by ``default-scheduler``, action ``Scheduling`` (:func:`core_event`)."""
    return core_event(
        pod,
        api_version="v1",
        kind="Pod",
        event_type="Warning",
        reason=FAILED_SCHEDULING,
        message=message,
        component=SCHEDULER_NAME,
        now=now,
        serial=serial,
        action="Scheduling",
    )


def core_event(
    obj: Mapping[str, Any],
    *,
    api_version: str,
    kind: str,
    event_type: str,
    reason: str,
    message: str,
    component: str,
    now: datetime.datetime,
    serial: int = 0,
    action: str = "",
) -> Object:
    """The core v1 Event a controller (``component``: its source and reporting component) records about ``obj``
    (a stored object of ``api_version``/``kind``: its ``metadata.name``, ``namespace``, ``uid``): ``event_type``
    (Normal or Warning), ``reason``, ``message``, ``action`` when given, count 1, first and last seen ``now`` (an
    aware datetime). Named as client-go names Events, ``<object>.<hex nanoseconds>``, ``serial`` added to the
    nanoseconds to keep two Events of one instant apart."""
    meta = obj["metadata"]
    namespace = meta.get("namespace") or "default"
    stamp = store.format_timestamp(now)
    nanos = int(now.timestamp()) * 1_000_000_000 + now.microsecond * 1000 + serial
    event: Object = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{meta['name']}.{nanos:x}", "namespace": namespace},
        "involvedObject": {
            "apiVersion": api_version,
            "kind": kind,
            "namespace": namespace,
            "name": meta["name"],
            "uid": meta.get("uid", ""),
        },
        "type": event_type,
        "reason": reason,
        "message": message,
        "count": 1,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": "",
    }
    if action:
        event["action"] = action
    return event


def _queue_order(pod: Mapping[str, Any]) -> tuple[int, str]:
    """kube-scheduler's active queue order (queuesort PrioritySort): higher ``spec.priority`` first, then older."""
    priority = (pod.get("spec") or {}).get("priority")
    created = str((pod.get("metadata") or {}).get("creationTimestamp") or "")
    return (-priority if isinstance(priority, int) else 0, created)


def replica_set_for(deployment: Mapping[str, Any]) -> Object:
    """The ReplicaSet a Deployment's current template runs in (deployment controller getNewReplicaSet)."""
    meta = deployment["metadata"]
    template = json.loads(json.dumps(_template(deployment)))
    template_hash = safe_hash(template)
    template.setdefault("metadata", {}).setdefault("labels", {})[POD_TEMPLATE_HASH_LABEL] = template_hash
    selector = json.loads(json.dumps((deployment.get("spec") or {}).get("selector") or {}))
    selector.setdefault("matchLabels", {})[POD_TEMPLATE_HASH_LABEL] = template_hash
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": f"{meta['name']}-{template_hash}",
            "namespace": meta.get("namespace"),
            "labels": dict(template["metadata"]["labels"]),
            "ownerReferences": [owner_ref(deployment)],
        },
        "spec": {"replicas": _replicas(deployment), "selector": selector, "template": template},
    }


def statefulset_pod(sts: Mapping[str, Any], ordinal: int, *, leader_pods: Mapping[str, Any] | None = None) -> Object:
    """Pod ``<name>-<ordinal>`` of a StatefulSet (statefulset newVersionedStatefulSetPod), with LWS's labels when
    the StatefulSet is a LeaderWorkerSet's (its pod webhook: leader pods get their group index from the ordinal,
    worker pods their worker index)."""
    meta = sts["metadata"]
    name = f"{meta['name']}-{ordinal}"
    pod = pod_from_template(_template(sts), namespace=meta.get("namespace"), owner=sts)
    pod["metadata"]["name"] = name
    labels = pod["metadata"]["labels"]
    labels[STS_POD_NAME_LABEL] = name
    labels[serving.STATEFULSET_POD_INDEX_LABEL] = str(ordinal)
    labels[REVISION_LABEL] = f"{meta['name']}-{safe_hash(_template(sts))}"
    pod["spec"].setdefault("hostname", name)
    if (sts.get("spec") or {}).get("serviceName"):
        pod["spec"].setdefault("subdomain", sts["spec"]["serviceName"])
    lws_name = labels.get(serving.LWS_NAME_LABEL)
    if lws_name:
        if serving.LWS_GROUP_INDEX_LABEL in labels:  # a worker StatefulSet
            labels[serving.LWS_WORKER_INDEX_LABEL] = str(ordinal)
        else:  # the leader StatefulSet
            labels[serving.LWS_GROUP_INDEX_LABEL] = str(ordinal)
            labels[serving.LWS_WORKER_INDEX_LABEL] = "0"
            labels[serving.LWS_GROUP_KEY_LABEL] = safe_hash([pod["metadata"]["namespace"], lws_name, ordinal], 40)
    return pod


def statefulset_current_revision(sts: Mapping[str, Any], live: Iterable[Mapping[str, Any]], update: str) -> str:
    """``status.currentRevision`` of a StatefulSet (stateful_set_control.go computeReplicaStatus /
    completeRollingUpdate): the revision its pods were at before ``update`` (the template's now), kept while a
    live pod still has another revision than ``update``; ``update`` once every live pod has it (the rollout
    complete). A pod's revision is its ``controller-revision-hash`` label."""
    older = {
        str((p.get("metadata") or {}).get("labels", {}).get(REVISION_LABEL) or "")
        for p in live
        if (p.get("metadata") or {}).get("labels", {}).get(REVISION_LABEL) != update
    }
    older.discard("")
    if not older:
        return update
    previous = str((sts.get("status") or {}).get("currentRevision") or "")
    return previous if previous in older else min(older)


def lws_conditions(previous: list[Any], *, available: bool, now: str) -> list[Object]:
    """The LeaderWorkerSet controller's Available and Progressing conditions (sigs.k8s.io/lws
    leaderworkerset_controller.go makeCondition, setCondition): while not every group is ready, Progressing True
    ``GroupsProgressing`` "Replicas are progressing"; once all are, Available True ``AllGroupsReady`` "All replicas
    are ready". The two exclude each other: setting one True sets the other, if there, False with its reason
    kept (Kueue's e2e reads Available False ``AllGroupsReady`` on a deactivated group). ``previous``: the
    conditions the status has (their transition times are kept while their status holds); ``now``: RFC 3339."""
    by_type = {str(c.get("type")): dict(c) for c in previous if isinstance(c, dict)}
    if available:
        on, off, reason, message = "Available", "Progressing", "AllGroupsReady", "All replicas are ready"
    else:
        on, off, reason, message = "Progressing", "Available", "GroupsProgressing", "Replicas are progressing"
    if by_type.get(on, {}).get("status") != "True":
        by_type[on] = {"type": on, "status": "True", "reason": reason, "message": message, "lastTransitionTime": now}
    if by_type.get(off, {}).get("status") == "True":
        by_type[off] = {**by_type[off], "status": "False", "lastTransitionTime": now}
    return [by_type[kind] for kind in ("Available", "Progressing") if kind in by_type]


def lws_revision(lws: Mapping[str, Any]) -> str:
    """The revision of a LeaderWorkerSet's templates (``spec.leaderWorkerTemplate``): what its leader StatefulSet,
    worker StatefulSets and pods carry in LWS's ``template-revision-hash`` label (LWS keeps ControllerRevisions of
    them; here the hash alone tells an update)."""
    return safe_hash((lws.get("spec") or {}).get("leaderWorkerTemplate") or {})


def lws_leader_statefulset(lws: Mapping[str, Any], *, replicas: int | None = None, partition: int = 0) -> Object:
    """The leader StatefulSet of a LeaderWorkerSet: ``replicas`` leader pods (default the LeaderWorkerSet's; more
    during a surge) from the leader template, or the worker template without one, all at once, with LWS's
    revision label, the LeaderWorkerSet's replicas annotation and a RollingUpdate ``partition``
    (leaderworkerset_controller.go constructLeaderStatefulSetApplyConfiguration)."""
    meta = lws["metadata"]
    template_spec = (lws.get("spec") or {}).get("leaderWorkerTemplate") or {}
    size = _size(lws)
    revision = lws_revision(lws)
    chosen = template_spec.get("leaderTemplate") or template_spec.get("workerTemplate") or {}
    template = json.loads(json.dumps(chosen))
    labels = template.setdefault("metadata", {}).setdefault("labels", {})
    labels[serving.LWS_NAME_LABEL] = meta["name"]
    labels[leaderworkersets.REVISION_LABEL] = revision
    template["metadata"].setdefault("annotations", {})[serving.LWS_SIZE_ANNOTATION] = str(size)
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": meta["name"],
            "namespace": meta.get("namespace"),
            "labels": {serving.LWS_NAME_LABEL: meta["name"], leaderworkersets.REVISION_LABEL: revision},
            "annotations": {leaderworkersets.REPLICAS_ANNOTATION: str(_replicas(lws))},
            "ownerReferences": [owner_ref(lws)],
        },
        "spec": {
            "replicas": _replicas(lws) if replicas is None else replicas,
            "podManagementPolicy": "Parallel",
            "serviceName": meta["name"],
            "selector": {"matchLabels": {serving.LWS_NAME_LABEL: meta["name"], serving.LWS_WORKER_INDEX_LABEL: "0"}},
            "template": template,
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": partition}},
        },
    }


def lws_worker_statefulset(lws: Mapping[str, Any], leader: Mapping[str, Any]) -> Object | None:
    """The worker StatefulSet of one group: named after its leader pod and owned by it, ``size - 1`` pods from
    ordinal 1; None when the group has no workers."""
    template_spec = (lws.get("spec") or {}).get("leaderWorkerTemplate") or {}
    size = _size(lws)
    if size <= 1:
        return None
    leader_meta = leader["metadata"]
    leader_labels = leader_meta.get("labels") or {}
    template = json.loads(json.dumps(template_spec.get("workerTemplate") or {}))
    labels = template.setdefault("metadata", {}).setdefault("labels", {})
    for key in (
        serving.LWS_NAME_LABEL,
        serving.LWS_GROUP_INDEX_LABEL,
        serving.LWS_GROUP_KEY_LABEL,
        leaderworkersets.REVISION_LABEL,
    ):
        if key in leader_labels:
            labels[key] = leader_labels[key]
    annotations = template["metadata"].setdefault("annotations", {})
    annotations[serving.LWS_SIZE_ANNOTATION] = str(size)
    annotations[serving.LWS_LEADER_NAME_ANNOTATION] = leader_meta["name"]
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": leader_meta["name"],
            "namespace": leader_meta.get("namespace"),
            "labels": {
                k: labels[k]
                for k in (serving.LWS_NAME_LABEL, serving.LWS_GROUP_INDEX_LABEL, leaderworkersets.REVISION_LABEL)
                if k in labels
            },
            "ownerReferences": [owner_ref({"apiVersion": "v1", "kind": "Pod", "metadata": leader_meta})],
        },
        "spec": {
            "replicas": size - 1,
            "podManagementPolicy": "Parallel",
            "ordinals": {"start": 1},
            "serviceName": lws["metadata"]["name"],
            "selector": {
                "matchLabels": {
                    k: v
                    for k, v in labels.items()
                    if k not in (serving.LWS_WORKER_INDEX_LABEL, leaderworkersets.REVISION_LABEL)
                }
            },
            "template": template,
        },
    }


def scale_in_order(pods: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Pods in the order a ReplicaSet deletes them: gated (unscheduled) first, then not ready, then youngest."""

    def key(pod: Mapping[str, Any]) -> tuple[bool, bool, str]:
        created = str((pod.get("metadata") or {}).get("creationTimestamp") or "")
        return (not is_gated(pod), is_ready(pod), "".join(chr(0x10FFFF - ord(c)) for c in created))

    return sorted(pods, key=key)


def running_status(pod: Mapping[str, Any], now: str) -> Object:
    """The status a kubelet writes for a pod whose containers all started and are ready."""
    containers = (pod.get("spec") or {}).get("containers") or []
    condition_types = ("PodScheduled", "Initialized", "ContainersReady", "Ready")
    return {
        "phase": "Running",
        "startTime": now,
        "conditions": [{"type": t, "status": "True", "lastTransitionTime": now} for t in condition_types],
        "containerStatuses": [
            {
                "name": c.get("name", ""),
                "image": c.get("image", ""),
                "ready": True,
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": now}},
            }
            for c in containers
            if isinstance(c, dict)
        ],
    }


def succeeded_status(pod: Mapping[str, Any], *, now: datetime.datetime) -> dict[str, Any]:
    """What a kubelet writes once every container of ``pod`` exited 0: phase Succeeded, the containers
    terminated with reason Completed, Ready and ContainersReady False with reason PodCompleted, no message."""
    stamp = store.format_timestamp(now)
    status = pod.get("status") or {}
    started = status.get("startTime") or stamp
    previous = {c.get("name"): c for c in status.get("containerStatuses") or [] if isinstance(c, dict)}
    container_statuses = []
    for container in (pod.get("spec") or {}).get("containers") or []:
        if not isinstance(container, dict):
            continue
        before = previous.get(container.get("name")) or {}
        running = (before.get("state") or {}).get("running") or {}
        container_statuses.append(
            {
                "name": container.get("name", ""),
                "image": container.get("image", ""),
                "ready": False,
                "started": False,
                "restartCount": before.get("restartCount", 0),
                "state": {
                    "terminated": {
                        "exitCode": 0,
                        "reason": "Completed",
                        "startedAt": running.get("startedAt") or started,
                        "finishedAt": stamp,
                    }
                },
            }
        )
    conditions = []
    for condition in status.get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") in ("Ready", "ContainersReady"):
            condition = {**condition, "status": "False", "reason": "PodCompleted", "lastTransitionTime": stamp}
        conditions.append(condition)
    return {"phase": "Succeeded", "conditions": conditions, "containerStatuses": container_statuses}


# -- the runner -------------------------------------------------------------------------------------


class SimulatedControllers:
    """Runs the simulated controllers against ``api`` (the emulator) until cancelled; see the module docstring.

    ``lws``: also run the LeaderWorkerSet controller (its kind must be served; without it the watch retries
    quietly in the background). ``ray``: also run the KubeRay stand-in for RayClusters and RayJobs, likewise.
    ``clock``: the UTC time for pod start times and CronJob schedules. ``next_schedule``: when the next
    CronJob is due (just after its schedule time), the controllers' timer; None with no CronJob due.
    """

    def __init__(
        self,
        api: k8s_client.ApiClient,
        *,
        lws: bool = True,
        ray: bool = True,
        clock: Callable[[], datetime.datetime] = store.utc_now,
        watch_options: dict[str, Any] | None = None,
    ) -> None:
        self._api = api
        self._clock = clock
        self._watch_options = watch_options or {}
        self._kinds = {
            k: ref for k, ref in _KINDS.items() if (lws or k != "LeaderWorkerSet") and (ray or k not in _RAY_KINDS)
        }
        self.objects: dict[str, dict[Key, Object]] = {kind: {} for kind in self._kinds}
        self._synced: set[str] = set()
        self._wakeup = asyncio.Event()
        # set (and replaced) on each change of a CustomResourceDefinition: a CRD kind not served yet is listed
        # again then, not polled (15 kinds every 2 s kept an idle demo busy answering 404s)
        self._crds_changed = asyncio.Event()
        self.next_schedule: datetime.datetime | None = None
        self._unschedulable_said: dict[str, str] = {}  # pod UID -> the FailedScheduling message recorded
        # owner UID -> the refusal of one of its pods last recorded as FailedCreate (recorders fold the repeats)
        self._failed_create_said: dict[str, str] = {}
        self._event_serial = itertools.count()  # keeps Event names apart within one clock tick
        # pod UID -> when the taint-eviction stand-in first saw it due for eviction after tolerationSeconds
        self._taint_seen: dict[str, datetime.datetime] = {}
        self.next_eviction: datetime.datetime | None = None  # the earliest such eviction due, the timer's too

    async def run(self) -> None:
        """Watch every kind and reconcile whenever something changed, or a CronJob is due (cancel to stop)."""
        tasks = [asyncio.create_task(self._watch(kind, ref), name=f"sim-{kind}") for kind, ref in self._kinds.items()]
        tasks.append(asyncio.create_task(self._watch_crds(), name="sim-crds"))
        try:
            while True:
                await self._until_woken()
                self._wakeup.clear()
                try:
                    await self.reconcile()
                except errors.KubeError as err:
                    logger.warning("sim_controllers_retry", error=str(err))
                    await asyncio.sleep(0.5)
                    self._wakeup.set()
        finally:
            await cancel_and_wait(tasks)

    @property
    def ready(self) -> bool:
        """Whether every kind (but a CRD's kind not served yet) has been listed once: reconcile acts from then."""
        return set(self._kinds) - set(_CRD_KINDS) <= self._synced

    def wake(self) -> None:
        """Reconcile now, as the timer does at a CronJob's schedule time (for a clock that is not the wall's)."""
        self._wakeup.set()

    async def _until_woken(self) -> None:
        """Until a watch event or :meth:`wake`, or else :attr:`next_schedule` (by ``clock``) is reached."""
        timeout = None
        due = [t for t in (self.next_schedule, self.next_eviction) if t is not None]
        if due:
            timeout = max(0.0, (min(due) - self._clock()).total_seconds())
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):  # not wait_for: 3.11's can swallow a cancellation
                await self._wakeup.wait()

    async def _watch_crds(self) -> None:
        """Tell the kinds waiting for their CRD of every CustomResourceDefinition change (none served: nothing)."""
        try:
            async for item in client.watch_objects(self._api, custom_resources.CRDS, **self._watch_options):
                if not isinstance(item, client.Resynced) or item.objects:
                    changed, self._crds_changed = self._crds_changed, asyncio.Event()
                    changed.set()
        except errors.KubeError as err:  # no CRDs served here: the waiting kinds fall back to a slow poll
            logger.info("sim_crds_unwatched", error=str(err))

    async def _watch(self, kind: str, ref: resources.ResourceRef) -> None:
        if kind in _CRD_KINDS:  # its CRD may come later (kubectl apply): wait quietly until it is served
            while True:
                changed = self._crds_changed
                try:
                    await client.list_objects(self._api, ref)
                    break
                except errors.KubeError:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(CRD_POLL_SECONDS):
                            await changed.wait()
        async for item in client.watch_objects(self._api, ref, **self._watch_options):
            if isinstance(item, client.Resynced):
                self.objects[kind] = {_key(o): o for o in item.objects}
                self._synced.add(kind)
            elif item.type == "DELETED":
                self.objects[kind].pop(_key(item.object), None)
            else:
                self._remember(kind, item.object)
            self._wakeup.set()

    def _remember(self, kind: str, obj: Object) -> None:
        old = self.objects[kind].get(_key(obj))
        if old is not None and _version(old) > _version(obj):
            return  # an older event than what a write of ours returned
        self.objects[kind][_key(obj)] = obj

    # -- reconcile ------------------------------------------------------------------------------

    async def reconcile(self) -> None:
        """One pass over every controller: create and delete what is missing or too many, write statuses."""
        if not {"Deployment", "ReplicaSet", "StatefulSet", "Pod"} <= self._synced:
            return
        await self._collect_garbage()
        for deployment in self._live("Deployment"):
            await self._deployment(deployment)
        for rs in self._live("ReplicaSet"):
            await self._replica_set(rs)
        for lws in self._live("LeaderWorkerSet"):
            await self._lws(lws)
        for sts in self._live("StatefulSet"):
            await self._statefulset(sts)
        await self._cron_jobs()
        if {"JobSet", "Job"} <= self._synced:
            for jobset in self._live("JobSet"):
                await self._jobset(jobset)
        for job in self._live("Job"):
            await self._elastic_job(job)
        for rayjob in self._live("RayJob"):
            await self._rayjob(rayjob)
        for cluster in self._live("RayCluster"):
            await self._ray_cluster(cluster)
        for aw in self._live("AppWrapper"):
            await self._appwrapper(aw)
        for kind in training.KINDS:
            if kind in self._synced:
                for job in self._live(kind):
                    await self._training_job(training.KINDS[kind], job)
        if {"TrainJob", "JobSet"} <= self._synced:
            for trainjob in self._live("TrainJob"):
                await self._trainjob(trainjob)
        if "Node" in self._synced:
            await self._evict_tainted()
        await self._run_pods()

    def _live(self, kind: str) -> list[Object]:
        """The objects of ``kind`` not being deleted: a controller makes nothing more for one that is (its
        dependents are the garbage collector's then), as kube-controller-manager's controllers do."""
        return [
            o for o in self.objects.get(kind, {}).values() if not (o.get("metadata") or {}).get("deletionTimestamp")
        ]

    def _owned(self, kind: str, owner: Mapping[str, Any]) -> list[Object]:
        uid = owner["metadata"]["uid"]
        return [o for o in self.objects[kind].values() if controller_uid(o) == uid]

    async def _collect_garbage(self) -> None:
        uids = {
            o["metadata"]["uid"]: kind
            for kind, objs in self.objects.items()
            for o in objs.values()
            if o.get("metadata", {}).get("uid")
        }
        for kind in _COLLECTED:
            for obj in list(self.objects.get(kind, {}).values()):
                owner = next(
                    (
                        r
                        for r in obj["metadata"].get("ownerReferences") or []
                        if isinstance(r, dict) and r.get("controller")
                    ),
                    None,
                )
                owner_kind = str((owner or {}).get("kind") or "")
                if owner is None or owner_kind not in self._kinds or owner_kind not in self._synced:
                    continue
                if owner.get("uid") not in uids:
                    await self._collect(kind, obj, owner_uid=str(owner.get("uid") or ""))
        await self._collect_workloads(uids)

    async def _collect(self, kind: str, obj: Object, *, owner_uid: str) -> None:
        """Delete ``obj`` (as the watch last showed it), whose controller ``owner_uid`` is gone, as
        kube-controller-manager's attemptToDeleteItem does: the object is read again and deleted only while its
        controller reference still names that owner, with the UID and resourceVersion read as preconditions. An
        owner deleted with propagationPolicy Orphan takes its reference off its dependents before it goes, so a
        watch that shows the owner gone before the dependent's change does not make the collector delete an
        orphan (a Job's pods after ``kubectl delete job --cascade=orphan``)."""
        live = await self._read_live(kind, obj)
        if live is None or controller_uid(live) != owner_uid:
            return
        await self._delete(kind, live, precondition=True)

    async def _read_live(self, kind: str, obj: Object) -> Object | None:
        """``obj`` as the API server holds it now (remembered), None when it is gone or another object of its name
        (then forgotten): the collector's decisions are made on it, as attemptToDeleteItem reads the item first."""
        meta = obj["metadata"]
        try:
            live = await client.get_object(
                self._api, self._kinds[kind], namespace=meta.get("namespace"), name=meta["name"]
            )
        except errors.NotFoundError:
            live = None
        if live is None or live["metadata"].get("uid") != meta.get("uid"):
            if self.objects[kind].get(_key(obj)) is obj:
                self.objects[kind].pop(_key(obj), None)
            return None
        self._remember(kind, live)
        return live

    async def _collect_workloads(self, uids: Mapping[str, str]) -> None:
        """The garbage collector's background part for Workload objects (:func:`garbage.background_collection`):
        one whose owners are all gone is deleted, one with a live owner left loses its references to the gone
        ones (a StatefulSet's held Workload once its pods went). ``uids``: the UIDs the watches know, by kind. An
        owner not known is looked up before it counts as gone (kube-controller-manager's isDangling reads it live:
        a watch may not have shown a new owner yet); a Workload naming a kind not watched here is left alone."""
        if "Workload" not in self._synced:
            return
        for cached in list(self.objects["Workload"].values()):
            if not self._maybe_collected(cached, uids):
                continue
            # read again after the watch's view said so (attemptToDeleteItem reads the item first): an orphaning
            # deletion of its owner took the reference off before the owner went, whatever the watches showed
            wl = await self._read_live("Workload", cached)
            if wl is None or not self._maybe_collected(wl, uids):
                continue
            meta = wl["metadata"]
            refs = [r for r in meta.get("ownerReferences") or [] if isinstance(r, dict)]
            owners: dict[str, Mapping[str, Any] | None] = {}
            for ref in refs:
                uid = str(ref.get("uid") or "")
                owners[uid] = await self._owner(str(meta.get("namespace") or ""), ref)
            action = garbage.background_collection(wl, owners)
            if action is None:
                continue
            # the resourceVersion read is a precondition: a change since (its references taken off) refuses it
            if not action:
                await self._delete("Workload", wl, precondition=True)
            else:
                kept = [r for r in refs if r.get("uid") not in action]
                patch = {"metadata": {"ownerReferences": kept, "resourceVersion": meta.get("resourceVersion")}}
                with contextlib.suppress(errors.ConflictError):
                    await self._patch("Workload", wl, patch)

    def _maybe_collected(self, wl: Object, uids: Mapping[str, str]) -> bool:
        """Whether Workload ``wl`` names an owner the watches do not know (maybe gone), all of kinds watched here."""
        meta = wl["metadata"]
        refs = [r for r in meta.get("ownerReferences") or [] if isinstance(r, dict)]
        if not refs or meta.get("deletionTimestamp") or all(r.get("uid") in uids for r in refs):
            return False
        # an owner of a kind not watched (or not listed yet) cannot be told gone; a Workload can (ConcurrentAdmission's
        # variants are owned by their parent Workload)
        return not any(str(r.get("kind") or "") not in self._synced for r in refs)

    async def _owner(self, namespace: str, ref: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The object an owner reference names as it is now, read live; None when gone (or another of that name)."""
        kind = str(ref.get("kind") or "")
        try:
            obj = await client.get_object(self._api, self._kinds[kind], namespace=namespace, name=str(ref.get("name")))
        except errors.NotFoundError:
            return None
        return obj if (obj.get("metadata") or {}).get("uid") == ref.get("uid") else None

    async def _deployment(self, deployment: Object) -> None:
        """The deployment controller's sync (pkg/controller/deployment): the ReplicaSet of the current template made
        or re-used, each ReplicaSet scaled one rollout step (:func:`deployments.rollout`), the revision annotations
        that ``kubectl rollout history`` / ``undo`` read, and the status ``kubectl rollout status`` waits on."""
        wanted = replica_set_for(deployment)
        name = wanted["metadata"]["name"]
        owned = sorted(
            self._owned("ReplicaSet", deployment),
            key=lambda rs: (str(rs["metadata"].get("creationTimestamp") or ""), rs["metadata"]["name"]),
        )
        active = {rs["metadata"]["name"]: [p for p in self._owned("Pod", rs) if is_active(p)] for rs in owned}

        def state(rs: Object) -> deployments.ReplicaSetState:
            pods = active[rs["metadata"]["name"]]
            ready = sum(1 for p in pods if is_ready(p))
            return deployments.ReplicaSetState(rs["metadata"]["name"], _replicas(rs), ready, len(pods))

        # the oldest ReplicaSet whose template is the Deployment's but for the hash label (FindNewReplicaSet's
        # EqualIgnoreHash): `kubectl rollout undo` copies an old one's template back, which may not hash the same
        template = _without_hash(_template(deployment))
        current = next((rs for rs in owned if _without_hash(_template(rs)) == template), None)
        current = current or next((rs for rs in owned if rs["metadata"]["name"] == name), None)
        name = current["metadata"]["name"] if current is not None else name
        old = [rs for rs in owned if rs is not current]
        try:
            changes = deployments.rollout(
                deployment, None if current is None else state(current), [state(rs) for rs in old]
            )
        except ValueError as err:
            logger.warning("sim_deployment_refused", error=str(err))
            return
        old_revisions = [_annotation(rs, deployments.REVISION_ANNOTATION) for rs in old]
        revision = _annotation(current, deployments.REVISION_ANNOTATION) if current is not None else ""
        if not revision.isdigit() or any(r.isdigit() and int(r) >= int(revision) for r in old_revisions):
            # a new template, or an older one rolled back to (kubectl rollout undo): the highest revision
            revision = deployments.next_revision(old_revisions)
            if current is not None:
                await self._patch(
                    "ReplicaSet", current, {"metadata": {"annotations": {deployments.REVISION_ANNOTATION: revision}}}
                )
        if current is None and "" in changes:
            wanted["spec"]["replicas"] = changes.pop("")
            wanted["metadata"]["annotations"] = {deployments.REVISION_ANNOTATION: revision}
            await self._create("ReplicaSet", wanted)
        for rs in owned:
            if rs["metadata"]["name"] in changes:
                await self._patch("ReplicaSet", rs, {"spec": {"replicas": changes[rs["metadata"]["name"]]}})
        if _annotation(deployment, deployments.REVISION_ANNOTATION) != revision:
            await self._patch(
                "Deployment", deployment, {"metadata": {"annotations": {deployments.REVISION_ANNOTATION: revision}}}
            )
            deployment = self.objects["Deployment"].get(_key(deployment), deployment)
        pods = [p for group in active.values() for p in group]
        ready = sum(1 for p in pods if is_ready(p))
        wanted_total = sum(changes.get(rs["metadata"]["name"], _replicas(rs)) for rs in owned)
        # the deployment controller's calculateStatus (pkg/controller/deployment/sync.go): the replicas its
        # ReplicaSets want less those available, never below 0, and left out when 0 (omitempty) -- what
        # `kubectl get deployment` and Kueue's e2e tests read to see pods waiting for admission; updatedReplicas
        # the current template's pods, which `kubectl rollout status` compares with the others'
        status = {
            "observedGeneration": deployment["metadata"].get("generation", 1),
            "replicas": len(pods),
            "updatedReplicas": len(active.get(name, [])),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "unavailableReplicas": max(0, wanted_total - ready) or None,  # None: the merge patch removes it
        }
        await self._status("Deployment", deployment, status)

    async def _replica_set(self, rs: Object) -> None:
        pods = [p for p in self._owned("Pod", rs) if is_active(p)]
        wanted = _replicas(rs)
        for _ in range(wanted - len(pods)):
            pod = pod_from_template(_template(rs), namespace=rs["metadata"].get("namespace", ""), owner=rs)
            pod["metadata"]["generateName"] = f"{rs['metadata']['name']}-"
            # the ReplicaSet controller's Warning (controller_utils.go CreatePodsWithGenerateName)
            await self._create("Pod", pod, refused=(rs, "ReplicaSet", "replicaset-controller", "Error creating: {}"))
        for extra in scale_in_order(pods)[: max(0, len(pods) - wanted)]:
            await self._delete("Pod", dict(extra))
        pods = [p for p in self._owned("Pod", rs) if is_active(p)]
        ready = sum(1 for p in pods if is_ready(p))
        status = {"replicas": len(pods), "readyReplicas": ready, "availableReplicas": ready}
        await self._status("ReplicaSet", rs, status)

    async def _cron_jobs(self) -> None:
        """Each CronJob's sync at the clock's time (:func:`cronjobs.sync`): the Jobs it deletes and creates, its
        status; :attr:`next_schedule` is the earliest time one of them wants to be looked at again."""
        if not {"CronJob", "Job"} <= self._synced:
            return
        now = self._clock()
        due: list[datetime.datetime] = []
        for cron_job in list(self.objects["CronJob"].values()):
            wanted = cronjobs.sync(cron_job, self._owned("Job", cron_job), now=now)
            for job in wanted.delete:
                await self._delete("Job", job)
            status = wanted.status
            if wanted.create is not None and wanted.scheduled is not None:
                try:
                    created = await self._create("Job", wanted.create)
                except errors.KubeError as err:  # refused (a webhook, a quota): tried again on the next pass
                    logger.warning(
                        "sim_cronjob_job_refused",
                        cronjob=f"{cron_job['metadata'].get('namespace')}/{cron_job['metadata']['name']}",
                        job=wanted.create["metadata"]["name"],
                        error=str(err),
                    )
                    created = None
                if created is not None:  # else one of that name is not its own: nothing to list, as there
                    status = cronjobs.started(status, created, scheduled=wanted.scheduled)
            await self._replace_status("CronJob", cron_job, status)
            if wanted.next_sync is not None:
                due.append(wanted.next_sync)
        self.next_schedule = min(due, default=None)

    async def _jobset(self, jobset: Object) -> None:
        """The JobSet controller's pass over one JobSet (:func:`jobsets.sync`): its Jobs created, suspended,
        resumed or deleted, then its status."""
        wanted = jobsets.sync(jobset, self._owned("Job", jobset), now=store.format_timestamp(self._clock()))
        for job in wanted.delete:
            await self._delete("Job", job)
        for job in wanted.create:
            try:
                await self._create("Job", job)
            except errors.KubeError as err:  # refused (a webhook, a quota): tried again on the next pass
                logger.warning("sim_jobset_job_refused", job=job["metadata"]["name"], error=str(err))
        for job in wanted.clear_start:  # a started Job's template is immutable until startTime goes
            await self._write_status("Job", job, {"startTime": None})
        for job, patch in wanted.patch:
            await self._patch("Job", job, patch)
        await self._replace_status("JobSet", jobset, wanted.status)

    async def _training_job(self, kind: training.Kind, job: Object) -> None:
        """A Kubeflow training operator's pass over one job (:func:`training.sync`): its pods created or
        deleted, then its status."""
        wanted = training.sync(kind, job, self._owned("Pod", job), now=store.format_timestamp(self._clock()))
        for pod in wanted.delete:
            await self._delete("Pod", pod)
        for pod in wanted.create:
            try:
                await self._create("Pod", pod)
            except errors.KubeError as err:  # refused (a webhook, a quota): tried again on the next pass
                logger.warning("sim_training_pod_refused", pod=pod["metadata"]["name"], error=str(err))
        await self._replace_status(kind.kind, job, wanted.status)

    async def _trainjob(self, trainjob: Object) -> None:
        """The Kubeflow Trainer's pass over one TrainJob (:func:`training.sync_trainjob`): its JobSet created,
        suspended or resumed, then its status. A TrainJob whose runtime is missing is left as it is (the
        Trainer reports it; Kueue makes no Workload for it either)."""
        meta = trainjob["metadata"]
        child = next((j for j in self._owned("JobSet", trainjob) if j["metadata"]["name"] == meta["name"]), None)
        runtimes = {kind: self.objects.get(kind, {}) for kind in RUNTIME_REFS}
        try:
            wanted = training.sync_trainjob(trainjob, child, runtimes, now=store.format_timestamp(self._clock()))
        except manifests.ManifestError as err:
            logger.warning("sim_trainjob_not_built", trainjob=f"{meta.get('namespace')}/{meta['name']}", error=str(err))
            return
        if wanted.jobset_create is not None:
            try:
                await self._create("JobSet", wanted.jobset_create)
            except errors.KubeError as err:
                logger.warning("sim_trainjob_jobset_refused", trainjob=meta["name"], error=str(err))
        if child is not None and wanted.jobset_patch is not None:
            await self._patch("JobSet", child, wanted.jobset_patch)
        await self._replace_status("TrainJob", trainjob, wanted.status)

    async def _elastic_job(self, job: Object) -> None:
        """The Job controller's pods, for an elastic Job only (``kueue.x-k8s.io/elastic-job: "true"``; the pods
        of other Jobs are made and finished with their run, :mod:`kueue_es.sim.kubelet`): while it is not suspended, pods
        ``<job>-<5 chars>`` from its template up to ``parallelism``, scaling in gated pods first; none while
        suspended; its pods succeed once it is Complete (:func:`succeeded_status`: containers terminated,
        Completed). A scale-up adds pods and leaves the running ones be."""
        meta, spec = job.get("metadata") or {}, job.get("spec") or {}
        if (meta.get("annotations") or {}).get(slices.ELASTIC_JOB_ANNOTATION) != "true":
            return
        pods = [p for p in self._owned("Pod", job) if is_active(p)]
        conditions = (job.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Complete" and c.get("status") == "True" for c in conditions if isinstance(c, dict)):
            for pod in pods:  # its containers exited 0, as a kubelet writes it (the other Jobs' pods: kubelet.py)
                await self._write_status("Pod", pod, succeeded_status(pod, now=self._clock()))
            return
        parallelism = spec.get("parallelism")
        wanted = 0 if spec.get("suspend") else (int(parallelism) if isinstance(parallelism, int) else 1)
        for _ in range(wanted - len(pods)):
            pod = job_pod(job)
            pod["metadata"]["labels"].update(
                {
                    "batch.kubernetes.io/job-name": meta.get("name", ""),
                    "batch.kubernetes.io/controller-uid": meta["uid"],
                }
            )
            await self._create("Pod", pod)
        for extra in scale_in_order(pods)[: max(0, len(pods) - wanted)]:
            await self._delete("Pod", dict(extra))
        if not spec.get("suspend"):
            # the Job controller's counts follow its pods (a scale-up's pods once ungated and ready), so the
            # job's PodsReady can hold for the new count (the kubelet stub wrote only the first count)
            live = [p for p in self._owned("Pod", job) if is_active(p)]
            await self._status("Job", job, {"active": len(live) or None, "ready": sum(1 for p in live if is_ready(p))})

    async def _ray_cluster(self, cluster: Object) -> None:
        """KubeRay's pass over one RayCluster (:mod:`kueue_es.sim.kuberay`): its head and worker pods made or
        scaled in (gated pods first), then its status."""
        meta = cluster.get("metadata") or {}
        name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "")
        pods = [p for p in self._owned("Pod", cluster) if is_active(p)]
        for group in kuberay.groups(cluster):
            mine = [p for p in pods if kuberay.group_of(p, group)]
            for _ in range(group.wanted - len(mine)):
                pod = pod_from_template(group.template, namespace=namespace, owner=cluster)
                pod["metadata"]["generateName"] = kuberay.pod_generate_name(name, group)
                await self._create("Pod", pod)
            for extra in scale_in_order(mine)[: max(0, len(mine) - group.wanted)]:
                await self._delete("Pod", dict(extra))
        now = store.format_timestamp(self._clock())
        await self._status("RayCluster", cluster, kuberay.cluster_status(cluster, pods, now=now))

    async def _rayjob(self, rayjob: Object) -> None:
        """KubeRay's RayJob controller's pass over one RayJob (:func:`kuberay.rayjob_sync`): its RayCluster and
        submitter Job made or deleted, then its status."""
        if "RayCluster" not in self._synced:
            return
        wanted = kuberay.rayjob_sync(
            rayjob,
            self._owned("RayCluster", rayjob),
            self._owned("Job", rayjob),
            now=store.format_timestamp(self._clock()),
        )
        for cluster in wanted.delete_clusters:
            await self._delete("RayCluster", cluster)
        for job in wanted.delete_jobs:
            await self._delete("Job", job)
        for kind, body in (("RayCluster", wanted.create_cluster), ("Job", wanted.create_job)):
            if body is None:
                continue
            try:
                await self._create(kind, body)
            except errors.KubeError as err:  # refused (a webhook): tried again on the next pass
                logger.warning("sim_rayjob_refused", kind=kind, name=body["metadata"]["name"], error=str(err))
                return
        if wanted.status:
            await self._status("RayJob", rayjob, wanted.status)

    async def _appwrapper(self, aw: Object) -> None:
        """The AppWrapper controller's pass over one AppWrapper (:func:`appwrappers.sync`): its components
        deployed (:meth:`_deploy`; the first that cannot be fails it, :func:`appwrappers.create_failed`) or
        deleted, then its status."""
        owned = [o for kind in _COMPONENT_KINDS if kind in self._synced for o in self._owned(kind, aw)]
        name, namespace = aw["metadata"]["name"], aw["metadata"].get("namespace")
        pods = [
            p
            for p in self.objects["Pod"].values()
            if p["metadata"].get("namespace") == namespace
            and (p["metadata"].get("labels") or {}).get(appwrappers.APPWRAPPER_LABEL) == name
            and not p["metadata"].get("deletionTimestamp")
        ]
        now = store.format_timestamp(self._clock())
        try:
            wanted = appwrappers.sync(aw, owned, pods, now=now)
        except ValueError as err:  # a component whose pod sets cannot be read: Kueue refuses it too
            logger.warning("sim_appwrapper_unreadable", name=f"{namespace}/{name}", error=str(err))
            return
        for obj in wanted.delete:
            await self._delete(str(obj.get("kind")), obj)
        status = wanted.status
        for obj in wanted.create:
            error = await self._deploy(aw, obj)
            if error is not None:
                logger.warning("sim_appwrapper_create_failed", name=f"{namespace}/{name}", error=error)
                status = appwrappers.create_failed(status, error, now=now)
                break
        await self._replace_status("AppWrapper", aw, status)

    async def _deploy(self, aw: Object, obj: Object) -> str | None:
        """Create ``obj``, a component of ``aw``: None once it exists (or when it is refused for a while, by a
        webhook or a quota: tried again on the next pass), else the error that fails the AppWrapper, as
        createComponent's fatal ones: a kind no simulated controller runs (:func:`appwrappers.not_simulated`),
        one not served (no CRD: :func:`appwrappers.no_matches`), an invalid object (422), an object of its name
        another controls."""
        kind, api_version = str(obj.get("kind")), str(obj.get("apiVersion"))
        ref = self._kinds.get(kind)
        if kind not in _COMPONENT_KINDS or ref is None or ref.api_version != api_version:
            return appwrappers.not_simulated(kind, api_version)
        meta = obj["metadata"]
        try:
            created = await client.create_object(self._api, ref, namespace=meta.get("namespace"), body=obj)
        except errors.ConflictError:  # made before (a kind not listed yet), or someone else's
            try:
                found = await client.get_object(self._api, ref, namespace=meta.get("namespace"), name=meta["name"])
            except errors.NotFoundError:
                return None  # gone since: made again on the next pass
            if controller_uid(found) != aw["metadata"].get("uid"):
                return appwrappers.not_controlled(str(meta["name"]))
            return None
        except errors.NotFoundError as err:
            if kind not in self._synced:
                return appwrappers.no_matches(kind, api_version)
            logger.warning("sim_appwrapper_component_refused", kind=kind, error=str(err))
            return None
        except errors.ApiError as err:
            if err.status == 422:
                return err.message
            logger.warning("sim_appwrapper_component_refused", kind=kind, error=str(err))
            return None
        if kind in self.objects:
            self._remember(kind, created)
        logger.info("sim_created", kind=kind, name=f"{meta.get('namespace')}/{created['metadata']['name']}")
        return None

    async def _statefulset(self, sts: Object) -> None:
        spec = sts.get("spec") or {}
        start = (spec.get("ordinals") or {}).get("start", 0)
        wanted = range(start, start + _replicas(sts))
        pods = {p["metadata"]["name"]: p for p in self._owned("Pod", sts)}
        parallel = spec.get("podManagementPolicy") == "Parallel"
        for ordinal in wanted:
            pod = pods.get(f"{sts['metadata']['name']}-{ordinal}")
            if pod is None:
                # the StatefulSet controller's Warning (stateful_pod_control.go recordPodEvent)
                name = f"{sts['metadata']['name']}-{ordinal}"
                said = f"create Pod {name} in StatefulSet {sts['metadata']['name']} failed error: {{}}"
                await self._create(
                    "Pod", statefulset_pod(sts, ordinal), refused=(sts, "StatefulSet", "statefulset-controller", said)
                )
                if not parallel:
                    break
            elif not parallel and not is_ready(pod):
                break
        extra = sorted(
            (p for p in pods.values() if _ordinal(p) not in wanted and is_active(p)), key=_ordinal, reverse=True
        )
        for pod in extra if parallel else extra[:1]:
            await self._delete("Pod", pod)
        revision = f"{sts['metadata']['name']}-{safe_hash(_template(sts))}"
        if not extra:
            await self._roll_statefulset(sts, [p for p in pods.values() if _ordinal(p) in wanted], revision)
        live = [p for p in self._owned("Pod", sts) if is_active(p)]
        ready = sum(1 for p in live if is_ready(p))
        updated = sum(1 for p in live if p["metadata"].get("labels", {}).get(REVISION_LABEL) == revision)
        current = statefulset_current_revision(sts, live, revision)
        status = {
            "observedGeneration": sts["metadata"].get("generation", 1),
            "replicas": len(live),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "currentReplicas": sum(1 for p in live if p["metadata"].get("labels", {}).get(REVISION_LABEL) == current),
            "updatedReplicas": updated,
            "currentRevision": current,
            "updateRevision": revision,
        }
        await self._status("StatefulSet", sts, status)

    async def _roll_statefulset(self, sts: Object, pods: list[Object], revision: str) -> None:
        """The RollingUpdate strategy (the default; not ``OnDelete``) of the StatefulSet controller
        (pkg/controller/statefulset stateful_set_control.go updateStatefulSet): once every wanted pod is there,
        from the highest ordinal down, the first pod of an older template is deleted -- the loop above makes it
        again from the new one -- one at a time, and only while the pods above it are Ready."""
        spec = sts.get("spec") or {}
        if (spec.get("updateStrategy") or {}).get("type") == "OnDelete" or len(pods) < _replicas(sts):
            return
        partition = workloads.parse_int(
            ((spec.get("updateStrategy") or {}).get("rollingUpdate") or {}).get("partition")
        )
        for pod in sorted(pods, key=_ordinal, reverse=True):
            if partition is not None and _ordinal(pod) < partition:
                return  # below the partition: kept at the current revision
            if not is_active(pod) or (pod.get("metadata") or {}).get("deletionTimestamp"):
                return  # one being replaced: wait for it
            if pod["metadata"].get("labels", {}).get(REVISION_LABEL) != revision:
                await self._delete("Pod", pod)
                return
            if not is_ready(pod):
                return

    async def _lws(self, lws: Object) -> None:
        """The LeaderWorkerSet controller's reconcile (sigs.k8s.io/lws leaderworkerset_controller.go and
        pod_controller.go): the leader StatefulSet at the templates' revision with the rolling update's replicas and
        partition (:func:`leaderworkersets.rolling_update`), a worker StatefulSet per leader pod, and the status."""
        namespace = lws["metadata"].get("namespace", "")
        current = self.objects["StatefulSet"].get((namespace, lws["metadata"]["name"]))
        if current is None:
            await self._create("StatefulSet", lws_leader_statefulset(lws))
            return
        revision = lws_revision(lws)
        groups: dict[int, tuple[Object, list[Object], Object | None]] = {}
        for leader in self._owned("Pod", current):
            if not is_active(leader):
                continue
            workers_sts = lws_worker_statefulset(lws, leader)
            existing: Object | None = None
            workers: list[Object] = []
            if workers_sts is not None:
                existing = self.objects["StatefulSet"].get((namespace, workers_sts["metadata"]["name"]))
                if existing is None or controller_uid(existing) != leader["metadata"]["uid"]:
                    if existing is None:
                        await self._create("StatefulSet", workers_sts)
                    continue
                workers = [p for p in self._owned("Pod", existing) if is_active(p)]
            groups[_ordinal(leader)] = (leader, workers, existing)
        size = _size(lws)

        def state(index: int) -> leaderworkersets.GroupState:
            if index not in groups:
                return leaderworkersets.GroupState(False, False)
            leader, workers, workers_sts = groups[index]
            ready = is_ready(leader) and len(workers) == size - 1 and all(is_ready(w) for w in workers)
            updated = _label(leader, leaderworkersets.REVISION_LABEL) == revision and (
                workers_sts is None or _label(workers_sts, leaderworkersets.REVISION_LABEL) == revision
            )
            return leaderworkersets.GroupState(ready, updated)

        states = [state(i) for i in range(_replicas(current))]
        try:
            partition, replicas = leaderworkersets.rolling_update(
                lws, current, states, updated=_label(current, leaderworkersets.REVISION_LABEL) != revision
            )
        except ValueError as err:
            logger.warning("sim_leaderworkerset_refused", error=str(err))
            return
        wanted = lws_leader_statefulset(lws, replicas=replicas, partition=partition)
        patch: Object = {}
        if _label(current, leaderworkersets.REVISION_LABEL) != revision:  # the template itself only on an update:
            # the API server's defaulting makes the stored one differ from what is written
            patch = {
                "metadata": {"labels": wanted["metadata"]["labels"]},
                "spec": {"template": wanted["spec"]["template"]},
            }
        if (
            _replicas(current) != replicas
            or (current.get("spec") or {}).get("updateStrategy") != wanted["spec"]["updateStrategy"]
        ):
            patch.setdefault("spec", {}).update({k: wanted["spec"][k] for k in ("replicas", "updateStrategy")})
        if _annotation(current, leaderworkersets.REPLICAS_ANNOTATION) != str(_replicas(lws)):
            patch.setdefault("metadata", {})["annotations"] = wanted["metadata"]["annotations"]
        if patch:
            await self._patch("StatefulSet", current, patch)
        # LWS's updateConditions: every leader's group counts in ready/updated (surge ones too); Available once the
        # groups below replicas are all ready and, at or above the partition, updated
        lws_part = leaderworkersets.lws_partition(lws)
        ready_all = updated_all = ready_kept = kept_updated_ready = kept = 0
        for index in groups:
            group = state(index)
            ready_all += group.ready
            updated_all += group.updated
            if index < _replicas(lws):
                ready_kept += group.ready
                if index >= lws_part:
                    kept += 1
                    kept_updated_ready += group.ready and group.updated
        available = ready_kept == _replicas(lws) and kept_updated_ready == kept
        status = {
            "observedGeneration": lws["metadata"].get("generation", 1),
            "replicas": len([p for p in self._owned("Pod", current) if is_active(p)]),
            "readyReplicas": ready_all,
            "updatedReplicas": updated_all,
            "conditions": lws_conditions(
                (lws.get("status") or {}).get("conditions") or [],
                available=available,
                now=store.format_timestamp(self._clock()),
            ),
        }
        await self._status("LeaderWorkerSet", lws, status)

    async def _run_pods(self) -> None:
        """The scheduler and kubelet stand-in: each active pod with no scheduling gate left that does not run yet
        is bound to a node when Nodes exist (:func:`pick_node`: one it fits, with room for its requests in the
        node's allocatable less what the pods bound there take; ``spec.nodeName``, as the binding subresource sets
        it) and gets phase Running and Ready; pods are taken by priority, then age (kube-scheduler's queue order).
        A pod that fits no node stays Pending (:meth:`_unschedulable`) and is tried again at each reconcile (a pod
        finishing or a Node changing wakes it). With no Node at all, pods run unbound."""
        now = store.format_timestamp(self._clock())
        nodes = list(self.objects.get("Node", {}).values())
        used = node_used(self.objects["Pod"].values()) if nodes else {}
        pending = [
            pod
            for pod in self.objects["Pod"].values()
            if not is_gated(pod) and is_active(pod) and (pod.get("status") or {}).get("phase") != "Running"
        ]
        pending.sort(key=_queue_order)
        waiting = {str(pod["metadata"].get("uid")) for pod in pending}
        for uid in set(self._unschedulable_said) - waiting:
            del self._unschedulable_said[uid]
        for pod in pending:
            node_name = (pod.get("spec") or {}).get("nodeName")
            if not node_name and nodes:
                try:
                    node_name = pick_node(pod, nodes, used)
                    message = "" if node_name else unschedulable_message(pod, nodes, used)
                except manifests.ManifestError as err:
                    logger.warning("sim_pod_not_scheduled", error=str(err))
                    continue
                if node_name is None:
                    await self._unschedulable(pod, message, now)
                    continue
                await self._patch("Pod", pod, {"spec": {"nodeName": node_name}})
                on_node = used.setdefault(node_name, {})
                on_node["pods"] = on_node.get("pods", 0) + 1
                for resource, amount in pod_requests(pod).items():
                    on_node[resource] = on_node.get(resource, 0) + amount
                pod = self.objects["Pod"].get(_key(pod), pod)
            self._unschedulable_said.pop(str(pod["metadata"].get("uid")), None)
            await self._write_pod_status(pod, running_status(pod, now))

    async def _evict_tainted(self) -> None:
        """The taint-eviction controller stand-in (kube-controller-manager's taint-eviction-controller): delete
        each active pod bound to a node with a NoExecute taint it does not tolerate, at once, or when the least
        ``tolerationSeconds`` of its matching tolerations has passed since it was first seen due
        (:func:`noexecute_eviction_delay`; :attr:`next_eviction` wakes the controllers then). As Kubernetes, the
        pod first gets the DisruptionTarget condition (reason DeletionByTaintManager) and a Normal
        TaintManagerEviction Event, then is deleted; its controller makes it again, and Kueue's TAS node failure
        handling (TASReplaceNodeOnPodTermination) sees its pods gone from the node."""
        now = self._clock()
        nodes = self.objects.get("Node", {})
        seen_due: dict[str, datetime.datetime] = {}
        deadlines: list[datetime.datetime] = []
        for pod in list(self.objects["Pod"].values()):
            node_name = (pod.get("spec") or {}).get("nodeName")
            node = nodes.get(("", str(node_name))) if node_name else None
            if node is None or not is_active(pod):
                continue
            delay = noexecute_eviction_delay(pod, node)
            if delay is None:
                continue
            uid = str(pod["metadata"].get("uid"))
            seen = self._taint_seen.get(uid, now)
            when = seen + datetime.timedelta(seconds=delay)
            if when > now:
                seen_due[uid] = seen
                deadlines.append(when)
                continue
            await self._evict(pod, now)
        self._taint_seen = seen_due  # a pod no longer due (taint gone, toleration added) starts afresh
        self.next_eviction = min(deadlines, default=None)

    async def _evict(self, pod: Object, now: datetime.datetime) -> None:
        """Mark ``pod`` with the DisruptionTarget condition, record the TaintManagerEviction Event and delete it
        (taint_eviction.go addConditionAndDeletePod, emitPodDeletionEvent)."""
        meta = pod["metadata"]
        name = f"{meta.get('namespace')}/{meta['name']}"
        conditions = [c for c in (pod.get("status") or {}).get("conditions") or [] if isinstance(c, dict)]
        if not any(c.get("type") == "DisruptionTarget" and c.get("status") == "True" for c in conditions):
            condition = {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": TAINT_EVICTION_REASON,
                "message": TAINT_EVICTION_MESSAGE,
                "lastTransitionTime": store.format_timestamp(now),
            }
            others = [c for c in conditions if c.get("type") != "DisruptionTarget"]
            await self._write_status("Pod", pod, {"conditions": [*others, condition]})
        body = core_event(
            pod,
            api_version="v1",
            kind="Pod",
            event_type="Normal",
            reason=TAINT_EVICTION_EVENT,
            message=f"Marking for deletion Pod {name}",
            component=TAINT_EVICTION_COMPONENT,
            now=now,
            serial=next(self._event_serial),
        )
        try:
            await client.create_object(self._api, resources.EVENTS, namespace=body["metadata"]["namespace"], body=body)
        except errors.KubeError as err:  # best effort, as an Event recorder
            logger.info("sim_event_dropped", reason=TAINT_EVICTION_EVENT, error=str(err))
        await self._delete("Pod", pod)
        logger.info("sim_pod_evicted_by_taint", pod=name, node=(pod.get("spec") or {}).get("nodeName"))

    async def _unschedulable(self, pod: Object, message: str, now: str) -> None:
        """Leave ``pod`` Pending as kube-scheduler leaves a pod that fits no node: the PodScheduled condition False
        with reason Unschedulable and ``message`` (:func:`unschedulable_message`; written when it changes, its
        transition time kept while it stays False), and one Warning ``FailedScheduling`` Event per message, not one
        per attempt (the scheduler backs an unschedulable pod off and its Event recorder folds repeats)."""
        uid = str(pod["metadata"].get("uid"))
        conditions = [c for c in (pod.get("status") or {}).get("conditions") or [] if isinstance(c, dict)]
        old = next((c for c in conditions if c.get("type") == "PodScheduled"), None)
        if old is None or old.get("reason") != UNSCHEDULABLE_REASON or old.get("message") != message:
            condition = {
                "type": "PodScheduled",
                "status": "False",
                "reason": UNSCHEDULABLE_REASON,
                "message": message,
                "lastProbeTime": None,
                "lastTransitionTime": old.get("lastTransitionTime", now)
                if old is not None and old.get("status") == "False"
                else now,
            }
            others = [c for c in conditions if c.get("type") != "PodScheduled"]
            await self._write_pod_status(pod, {"phase": "Pending", "conditions": [condition, *others]})
        if self._unschedulable_said.get(uid) == message:
            return
        self._unschedulable_said[uid] = message
        if old is not None and old.get("reason") == UNSCHEDULABLE_REASON and old.get("message") == message:
            return  # recorded before this stand-in (re)started
        body = scheduling_event(pod, message=message, now=self._clock(), serial=next(self._event_serial))
        try:
            await client.create_object(self._api, resources.EVENTS, namespace=body["metadata"]["namespace"], body=body)
        except errors.KubeError as err:  # best effort, as an Event recorder
            logger.info("sim_event_dropped", reason=FAILED_SCHEDULING, error=str(err))
        logger.info("sim_pod_unschedulable", name=f"{pod['metadata'].get('namespace')}/{pod['metadata']['name']}")

    # -- writes ---------------------------------------------------------------------------------

    async def _create(
        self, kind: str, body: Object, *, refused: tuple[Object, str, str, str] | None = None
    ) -> Object | None:
        """Create ``body``; the stored object, or None when one of that name exists or the API server refuses it
        (403, 422: a pod naming a PriorityClass that does not exist, a webhook's denial). A refusal is logged and
        the owner tried again on a later pass, as a controller retries: raising it would stop the pass, and with it
        every other object's controller, until the owner changed. ``refused``: (the owner, its kind, the
        controller, the message with ``{}`` for the API server's) to record a Warning ``FailedCreate`` about the
        owner on a refusal, once per reason (:meth:`_failed_create`)."""
        ref = self._kinds[kind]
        try:
            created = await client.create_object(self._api, ref, namespace=body["metadata"].get("namespace"), body=body)
        except errors.ConflictError:
            return None
        except errors.ApiError as err:
            if err.status not in (403, 422):
                raise
            meta = body["metadata"]
            name = meta.get("name") or meta.get("generateName") or ""
            logger.warning("sim_create_refused", kind=kind, name=f"{meta.get('namespace')}/{name}", error=err.message)
            if refused is not None:
                await self._failed_create(*refused, said=err.message)
            return None
        self._remember(kind, created)
        logger.info(
            "sim_created", kind=kind, name=f"{created['metadata'].get('namespace')}/{created['metadata']['name']}"
        )
        return created

    async def _failed_create(self, owner: Object, kind: str, component: str, message: str, *, said: str) -> None:
        """Record the Warning ``FailedCreate`` of ``owner`` (a ``kind`` of apps/v1) whose pod the API server
        refused, saying ``said``: ``message`` with it in place of ``{}``, reported by ``component``. Once per
        reason whatever pod it names, as the controllers' retries back off and their recorders fold repeats."""
        why = REFUSED_POD.sub("", said)
        uid = str(owner["metadata"].get("uid"))
        if self._failed_create_said.get(uid) == why:
            return
        self._failed_create_said[uid] = why
        body = core_event(
            owner,
            api_version="apps/v1",
            kind=kind,
            event_type="Warning",
            reason="FailedCreate",
            message=message.format(said),
            component=component,
            now=self._clock(),
            serial=next(self._event_serial),
        )
        try:
            await client.create_object(self._api, resources.EVENTS, namespace=body["metadata"]["namespace"], body=body)
        except errors.KubeError as err:  # best effort, as an Event recorder
            logger.info("sim_event_dropped", reason="FailedCreate", error=str(err))

    async def _delete(self, kind: str, obj: Object, *, precondition: bool = False) -> None:
        """Delete ``obj``; with ``precondition``, only as it is (its UID and resourceVersion: a change since leaves
        it, 409, for the next reconcile)."""
        meta = obj["metadata"]
        options = None
        if precondition:
            options = {"preconditions": {"uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")}}
        try:
            await client.delete_object(
                self._api, self._kinds[kind], namespace=meta.get("namespace"), name=meta["name"], options=options
            )
        except errors.NotFoundError:
            pass
        except errors.ConflictError:
            return
        self.objects[kind].pop(_key(obj), None)
        logger.info("sim_deleted", kind=kind, name=f"{meta.get('namespace')}/{meta['name']}")

    async def _patch(self, kind: str, obj: Object, patch: Object) -> None:
        meta = obj["metadata"]
        try:
            stored = await client.patch_object(
                self._api, self._kinds[kind], namespace=meta.get("namespace"), name=meta["name"], patch=patch
            )
        except errors.NotFoundError:
            return
        self._remember(kind, stored)

    async def _status(self, kind: str, obj: Object, status: Object) -> None:
        current = obj.get("status") or {}
        if all(current.get(k) == v for k, v in status.items()):
            return
        await self._write_status(kind, obj, status)

    async def _replace_status(self, kind: str, obj: Object, status: Object) -> None:
        """Write ``status`` whole (the fields it lacks removed) unless the object has it already."""
        current = obj.get("status") or {}
        if current != status:
            await self._write_status(kind, obj, {**{key: None for key in current if key not in status}, **status})

    async def _write_status(self, kind: str, obj: Object, status: Object, *, as_seen: bool = False) -> None:
        """Merge ``status`` into ``obj``'s; ``as_seen``: only onto the object as this pass saw it (its
        resourceVersion a precondition), raising ConflictError when it changed since. Gone: nothing."""
        meta = obj["metadata"]
        patch: Object = {"status": status}
        if as_seen:
            patch["metadata"] = {"resourceVersion": meta.get("resourceVersion")}
        try:
            stored = await client.patch_object(
                self._api,
                self._kinds[kind],
                namespace=meta.get("namespace"),
                name=meta["name"],
                patch=patch,
                subresource="status",
            )
        except errors.NotFoundError:
            return
        self._remember(kind, stored)

    async def _write_pod_status(self, pod: Object, status: Object) -> None:
        """The scheduler stand-in's write of a pending pod's status (Running, or Pending and unschedulable), onto
        the pod as this pass saw it: the simulated kubelet writes pod status too (a Job's pods Succeeded), and a
        write from a stale view would undo its (a finished pod Running again, for good). A pod changed since is
        left for the pass its watch event wakes."""
        try:
            await self._write_status("Pod", pod, status, as_seen=True)
        except errors.ApiError as err:
            if err.status not in (409, 422):  # changed since (or finished: no container runs again)
                raise
            meta = pod["metadata"]
            logger.info("sim_pod_status_stale", pod=f"{meta.get('namespace')}/{meta.get('name')}", error=str(err))


def _key(obj: Mapping[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _version(obj: Mapping[str, Any]) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


def _without_hash(template: Mapping[str, Any]) -> Any:
    """A pod template as the deployment controller compares them (EqualIgnoreHash: Go structs, where a null is the
    zero value): without the ``pod-template-hash`` label and without null fields (``kubectl rollout undo`` writes
    ``creationTimestamp: null``)."""

    def bare(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: bare(v) for k, v in node.items() if v is not None}
        return [bare(v) for v in node] if isinstance(node, list) else node

    copy = bare(template)
    labels = (copy.get("metadata") or {}).get("labels")
    if isinstance(labels, dict):
        labels.pop(POD_TEMPLATE_HASH_LABEL, None)
    return copy


def _label(obj: Mapping[str, Any], key: str) -> str:
    return str(((obj.get("metadata") or {}).get("labels") or {}).get(key) or "")


def _annotation(obj: Mapping[str, Any], key: str) -> str:
    return str(((obj.get("metadata") or {}).get("annotations") or {}).get(key) or "")


def _ordinal(pod: Mapping[str, Any]) -> int:
    try:
        return int(((pod.get("metadata") or {}).get("labels") or {}).get(serving.STATEFULSET_POD_INDEX_LABEL, -1))
    except ValueError:
        return -1
