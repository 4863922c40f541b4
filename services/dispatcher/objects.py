"""The raw Kubernetes objects the dispatcher reads, as typed dicts.

Why this module exists: the dispatcher talks to the API server in plain JSON dicts
(:mod:`kueue_es.services.kube.client`), and reads a handful of fields of them: a
Job's pod template, a JobSet's replicated jobs, a Pod's gates and labels, every
object's metadata. These TypedDicts name those fields (``total=False``: the server
may leave any of them out, so every read is a ``.get``), so a misspelt key is a type
error rather than a silent ``None``. Only the fields the dispatcher reads are
declared; anything else the server sends is still there at run time.

The API operations (:mod:`.kube_api`) return untyped dicts, because a call's kind
is a run-time value (a ``ResourceRef``); the readers at the end (:func:`as_job`,
:func:`as_pod`, ...) are where the dispatcher says which kind it asked for. What it
*writes* (patches, applied configurations) stays ``dict[str, Any]``: those are
built, not read.

The watcher keeps its own (``kueue_es.services.kube.objects``); the two are to be
unified into one module.
"""

from __future__ import annotations

from typing import Any, TypedDict, cast

ObjectKey = tuple[str, str, str]
"""An object the dispatcher keeps: (kind, namespace or "" for a cluster-scoped one, name)."""

PodKey = tuple[str, str]
"""A pod: (namespace, name)."""


class OwnerReference(TypedDict, total=False):
    """metadata.ownerReferences[]: the object that owns this one (a Workload's Job)."""

    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: bool
    blockOwnerDeletion: bool


class ObjectMeta(TypedDict, total=False):
    """metadata: what identifies an object and what the dispatcher marks on it."""

    name: str
    namespace: str
    uid: str
    resourceVersion: str
    generation: int
    labels: dict[str, str]
    annotations: dict[str, str]
    ownerReferences: list[OwnerReference]


class PodSpec(TypedDict, total=False):
    """A pod's (or a pod template's) spec: what a start adds and a stop gives back."""

    nodeSelector: dict[str, str]
    tolerations: list[dict[str, Any]]
    schedulingGates: list[dict[str, Any]]


class PodStatus(TypedDict, total=False):
    """A pod's status: its phase tells a terminated pod."""

    phase: str


class Pod(TypedDict, total=False):
    """A v1 Pod: a plain-Pod workload's pod, or a started pod the TAS ungater gives its domain."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: PodSpec
    status: PodStatus


class PodTemplate(TypedDict, total=False):
    """A Job's ``spec.template``."""

    metadata: ObjectMeta
    spec: PodSpec


class JobSpec(TypedDict, total=False):
    """A batch/v1 Job's spec: suspended until admitted, its pod template started when it is."""

    suspend: bool
    parallelism: int
    completions: int
    template: PodTemplate


class Job(TypedDict, total=False):
    """A batch/v1 Job."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: JobSpec


class JobTemplate(TypedDict, total=False):
    """A replicated job's ``template`` (a Job template)."""

    metadata: ObjectMeta
    spec: JobSpec


class ReplicatedJob(TypedDict, total=False):
    """One of a JobSet's ``spec.replicatedJobs``: one pod set each."""

    name: str
    replicas: int
    template: JobTemplate


class JobSetSpec(TypedDict, total=False):
    """A JobSet's spec."""

    suspend: bool
    replicatedJobs: list[ReplicatedJob]


class JobSet(TypedDict, total=False):
    """A jobset.x-k8s.io JobSet."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: JobSetSpec


class StoredObject(TypedDict, total=False):
    """A Workload, ClusterQueue or LocalQueue as the server last returned it; the dispatcher compares
    its ``status`` (and the Workload's spec) with what it would write."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: dict[str, Any]
    status: dict[str, Any]


# -- reading an answer as the kind asked for ------------------------------------------------------


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


def meta(obj: Job | JobSet | Pod | StoredObject) -> ObjectMeta:
    """The object's metadata ({} when absent)."""
    return obj.get("metadata") or {}


def pod_spec(obj: Job) -> PodSpec:
    """A Job's pod template spec ({} when absent)."""
    return ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}


def pod_key(pod: Pod) -> PodKey:
    """(namespace, name) of a pod; a pod without a namespace is in ``default``."""
    metadata = meta(pod)
    return str(metadata.get("namespace") or "default"), str(metadata.get("name") or "")


def pod_name(pod: Pod) -> str:
    """A pod's name ("" when absent)."""
    return str(meta(pod).get("name") or "")
