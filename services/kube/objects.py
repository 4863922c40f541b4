"""The raw Kubernetes objects the edges read, as TypedDicts: what a JSON body from the API server holds.

Why this module exists: the watcher and the dispatcher pass the API server's JSON
around as plain dicts (``client.py`` builds no models), and ``dict[str, Any]``
says nothing about which fields they read. These TypedDicts name the fields the
edges use -- metadata, owner references, conditions, and the few fields of Jobs,
JobSets, Pods, Nodes and the cluster objects a job's conversion reads -- so a
reader of the code, and mypy, can see them. They are ``total=False``: the API
server leaves out empty fields, and every reader still checks what it gets, since
a dict from the wire is not checked against them. Kueue's own objects are parsed
into models instead (:mod:`kueue_es.events.manifests`).
"""

from __future__ import annotations

from typing import Any, TypedDict, cast

ObjectKey = tuple[str, str, str]
"""An object the dispatcher keeps: (kind, namespace or "" for a cluster-scoped one, name)."""

PodKey = tuple[str, str]
"""A pod: (namespace, name)."""


class OwnerReference(TypedDict, total=False):
    """metadata.ownerReferences[]: who controls the object (a JobSet's Jobs, a Job's Pods)."""

    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: bool
    blockOwnerDeletion: bool


class ObjectMeta(TypedDict, total=False):
    """metadata: identity, version, labels and annotations, owners."""

    name: str
    namespace: str
    uid: str
    resourceVersion: str
    generation: int
    creationTimestamp: str
    deletionTimestamp: str
    labels: dict[str, str]
    annotations: dict[str, str]
    ownerReferences: list[OwnerReference]
    finalizers: list[str]


class Condition(TypedDict, total=False):
    """status.conditions[] of a Job, a Pod or a Node."""

    type: str
    status: str
    reason: str
    message: str
    lastTransitionTime: str


class KubeObject(TypedDict, total=False):
    """Any object as listed or watched: its kind and metadata; the rest depends on the kind."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta


class PodSpec(TypedDict, total=False):
    """The parts of a pod spec the edges read by name; requests are read by :mod:`kueue_es.events.manifests`."""

    containers: list[dict[str, Any]]
    initContainers: list[dict[str, Any]]
    nodeName: str
    nodeSelector: dict[str, str]
    schedulingGates: list[dict[str, Any]]
    tolerations: list[dict[str, Any]]
    priorityClassName: str
    runtimeClassName: str
    overhead: dict[str, Any]


class PodTemplateSpec(TypedDict, total=False):
    """spec.template of a Job, and of a JobSet's replicated jobs."""

    metadata: ObjectMeta
    spec: PodSpec


class PodStatus(TypedDict, total=False):
    phase: str
    message: str
    conditions: list[Condition]
    containerStatuses: list[dict[str, Any]]


class Pod(KubeObject, total=False):
    spec: PodSpec
    status: PodStatus


class JobSpec(TypedDict, total=False):
    parallelism: int
    completions: int
    suspend: bool
    template: PodTemplateSpec


class UncountedTerminatedPods(TypedDict, total=False):
    succeeded: list[str]
    failed: list[str]


class JobStatus(TypedDict, total=False):
    active: int
    ready: int
    succeeded: int
    failed: int
    conditions: list[Condition]
    uncountedTerminatedPods: UncountedTerminatedPods


class Job(KubeObject, total=False):
    """A batch/v1 Job."""

    spec: JobSpec
    status: JobStatus


class JobTemplateSpec(TypedDict, total=False):
    """A replicated job's ``template``: a Job's metadata and spec."""

    metadata: ObjectMeta
    spec: JobSpec


class ReplicatedJob(TypedDict, total=False):
    name: str
    replicas: int
    template: JobTemplateSpec


class ReplicatedJobStatus(TypedDict, total=False):
    name: str
    ready: int
    succeeded: int
    failed: int
    active: int
    suspended: int


class JobSetSpec(TypedDict, total=False):
    suspend: bool
    replicatedJobs: list[ReplicatedJob]


class JobSetStatus(TypedDict, total=False):
    conditions: list[Condition]
    replicatedJobsStatus: list[ReplicatedJobStatus]


class JobSet(KubeObject, total=False):
    """A jobset.x-k8s.io/v1alpha2 JobSet."""

    spec: JobSetSpec
    status: JobSetStatus


class NodeSpec(TypedDict, total=False):
    unschedulable: bool
    taints: list[dict[str, Any]]


class NodeStatus(TypedDict, total=False):
    allocatable: dict[str, Any]
    conditions: list[Condition]


class Node(KubeObject, total=False):
    spec: NodeSpec
    status: NodeStatus


class PriorityClass(KubeObject, total=False):
    """A scheduling.k8s.io/v1 PriorityClass: the priority of jobs naming one."""

    value: int
    globalDefault: bool


class Overhead(TypedDict, total=False):
    podFixed: dict[str, Any]


class RuntimeClass(KubeObject, total=False):
    """A node.k8s.io/v1 RuntimeClass: its fixed pod overhead counts for pods naming it."""

    overhead: Overhead


class LimitRangeSpec(TypedDict, total=False):
    limits: list[dict[str, Any]]


class LimitRange(KubeObject, total=False):
    """A v1 LimitRange: container defaults and bounds in a namespace."""

    spec: LimitRangeSpec


class AdmissionCheckEntry(TypedDict, total=False):
    """status.admissionChecks[] of a Workload object, as a check controller writes it."""

    name: str
    state: str
    message: str
    requeueAfterSeconds: int
    podSetUpdates: list[dict[str, Any]]
    lastTransitionTime: str


class WorkloadObjectSpec(TypedDict, total=False):
    active: bool


class WorkloadObjectStatus(TypedDict, total=False):
    admissionChecks: list[AdmissionCheckEntry]


class WorkloadObject(KubeObject, total=False):
    """A kueue.x-k8s.io Workload object as read back: what check controllers and users change on it."""

    spec: WorkloadObjectSpec
    status: WorkloadObjectStatus


class StoredObject(KubeObject, total=False):
    """A Workload, ClusterQueue or LocalQueue as the server last returned it; the dispatcher compares
    its ``status`` (and the Workload's spec) with what it would write."""

    spec: dict[str, Any]
    status: dict[str, Any]


# -- reading an answer as the kind asked for: the API client returns untyped dicts, because a call's
# kind is a run-time value (a ResourceRef); these say which kind was asked for --------------------


def as_job(raw: dict[str, Any]) -> Job:
    """The server's answer to a GET of a Job."""
    return cast(Job, raw)


def as_jobset(raw: dict[str, Any]) -> JobSet:
    """The server's answer to a GET of a JobSet."""
    return cast(JobSet, raw)


def as_pod(raw: dict[str, Any]) -> Pod:
    """The server's answer to a GET, LIST, PATCH or watch of a Pod."""
    return cast(Pod, raw)


def as_stored(raw: dict[str, Any]) -> StoredObject:
    """The server's answer to an apply or a LIST of a Workload, ClusterQueue or LocalQueue."""
    return cast(StoredObject, raw)


def pod_spec(job: Job) -> PodSpec:
    """A Job's pod template spec ({} when absent)."""
    return ((job.get("spec") or {}).get("template") or {}).get("spec") or {}


def pod_key(pod: Pod) -> PodKey:
    """(namespace, name) of a pod; a pod without a namespace is in ``default``."""
    return namespace_of(pod), name_of(pod)


def meta(obj: KubeObject) -> ObjectMeta:
    """The object's metadata, or an empty one when it has none (or not a mapping)."""
    found = obj.get("metadata")
    return found if isinstance(found, dict) else {}


def name_of(obj: KubeObject) -> str:
    return str(meta(obj).get("name") or "")


def namespace_of(obj: KubeObject) -> str:
    """The object's namespace, ``default`` when it names none (as the API server defaults it)."""
    return str(meta(obj).get("namespace") or "default")


def resource_version(obj: KubeObject) -> str:
    return str(meta(obj).get("resourceVersion") or "")


def uid_of(obj: KubeObject) -> str:
    return str(meta(obj).get("uid") or "")
