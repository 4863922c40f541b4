"""Kueue's own objects to facts: ``*Observed``, or ObjectRejected when one is invalid.

Why this module exists: the watcher reports the Kueue objects (ResourceFlavors,
ClusterQueues, Cohorts, LocalQueues, WorkloadPriorityClasses, ...) as they are,
so the log holds what the cluster asked for; an object that cannot be read
becomes an ObjectRejected fact naming the object and the field, so a user can
see it on the log while the last valid version stays in force. Jobs, JobSets
and Pods become Workloads in the job framework (:mod:`kueue_es.jobframework`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec

from kueue_es.events import manifests, models, types
from kueue_es.jobframework import adjust, workloads
from kueue_es.scheduling import concurrent_admission as ca

_OBSERVED: dict[str, Callable[[Any], types.Fact]] = {
    "ResourceFlavor": lambda obj: types.ResourceFlavorObserved(flavor=obj),
    "ClusterQueue": lambda obj: types.ClusterQueueObserved(cluster_queue=obj),
    "Cohort": lambda obj: types.CohortObserved(cohort=obj),
    "LocalQueue": lambda obj: types.LocalQueueObserved(local_queue=obj),
    "WorkloadPriorityClass": lambda obj: types.WorkloadPriorityClassObserved(priority_class=obj),
    "Workload": lambda obj: types.WorkloadObserved(workload=obj),
    "Namespace": lambda obj: types.NamespaceObserved(namespace=obj),
    "AdmissionCheck": lambda obj: types.AdmissionCheckObserved(admission_check=obj),
    "Configuration": lambda obj: types.ConfigurationObserved(configuration=obj),
    "MultiKueueCluster": lambda obj: types.MultiKueueClusterObserved(cluster=obj),
    "MultiKueueConfig": lambda obj: types.MultiKueueConfigObserved(config=obj),
}


def kueue_fact(manifest: dict[str, Any], *, now_ms: int = 0) -> types.Fact:
    """The fact for one kueue.x-k8s.io object: ``*Observed``, or ObjectRejected if it is invalid."""
    try:
        obj = manifests.parse_object(manifest, strict=False)  # the API server checked its fields
    except manifests.ManifestError as err:
        return workloads.rejected(manifest, err, now_ms=now_ms)
    if isinstance(obj, models.Workload):
        obj = variant_marked(own_priority_marked(obj), manifest)
    return _OBSERVED[type(obj).__name__](obj)


def variant_marked(workload: models.Workload, manifest: Mapping[str, Any]) -> models.Workload:
    """``workload`` (observed as Workload object ``manifest``) with
    :data:`~kueue_es.scheduling.concurrent_admission.VARIANT_OF_ANNOTATION` set to its parent's UID and
    :data:`~kueue_es.scheduling.concurrent_admission.VARIANT_OF_NAME_ANNOTATION` to its parent's name when it is a
    ConcurrentAdmission variant (owned by a kueue.x-k8s.io Workload: concurrentadmission.go IsVariant), and
    without them otherwise (values a user set are dropped): the deciders find a variant's siblings by the UID, the
    dispatcher the job of its parent by the name."""
    parent = next(
        (
            (str(ref.get("uid") or ""), str(ref.get("name") or ""))
            for ref in (manifest.get("metadata") or {}).get("ownerReferences") or []
            if isinstance(ref, dict) and ca.is_variant({"metadata": {"ownerReferences": [ref]}})
        ),
        None,
    )
    wanted = (
        {ca.VARIANT_OF_ANNOTATION: parent[0], ca.VARIANT_OF_NAME_ANNOTATION: parent[1]}
        if parent is not None and parent[0]
        else {}
    )
    annotations = workload.metadata.annotations
    marks = (ca.VARIANT_OF_ANNOTATION, ca.VARIANT_OF_NAME_ANNOTATION)
    if {k: annotations[k] for k in marks if k in annotations} == wanted:
        return workload
    marked = {k: v for k, v in annotations.items() if k not in marks}
    marked.update(wanted)
    meta = msgspec.structs.replace(workload.metadata, annotations=marked)
    return msgspec.structs.replace(workload, metadata=meta)


def workload_fact(
    manifest: dict[str, Any],
    *,
    now_ms: int = 0,
    runtime_classes: Mapping[str, Mapping[str, Any]],
    limit_ranges: Sequence[Mapping[str, Any]],
) -> types.Fact:
    """The fact for a Workload object made by hand (no job): its WorkloadObserved with each pod set's requests
    adjusted by the RuntimeClass overheads and the namespace's LimitRanges (``limit_ranges``: their
    ``spec.limits`` items), and marked misconfigured when it breaks them (:func:`adjusted`); or ObjectRejected
    when it cannot be read."""
    return adjusted(
        kueue_fact(manifest, now_ms=now_ms),
        manifest,
        now_ms=now_ms,
        runtime_classes=runtime_classes,
        limit_ranges=limit_ranges,
    )


def adjusted(
    fact: types.Fact,
    manifest: dict[str, Any],
    *,
    now_ms: int = 0,
    runtime_classes: Mapping[str, Mapping[str, Any]],
    limit_ranges: Sequence[Mapping[str, Any]],
) -> types.Fact:
    """``fact``, the :func:`kueue_fact` of Workload object ``manifest``, with its pod sets adjusted and checked
    as Kueue's AdjustResources and ValidateLimitRange do (:func:`kueue_es.jobframework.adjust.adjusted_workload`);
    ``fact`` itself when that changes nothing or it is no WorkloadObserved; ObjectRejected when an adjusted
    quantity does not parse."""
    if not isinstance(fact, types.WorkloadObserved):
        return fact
    try:
        workload = adjust.adjusted_workload(
            fact.workload, manifest, runtime_classes=runtime_classes, limit_ranges=limit_ranges
        )
    except manifests.ManifestError as err:
        return workloads.rejected(manifest, err, now_ms=now_ms)
    return fact if workload is fact.workload else msgspec.structs.replace(fact, workload=workload)


def own_priority_marked(workload: models.Workload) -> models.Workload:
    """``workload`` (observed as a Workload object) with :data:`~kueue_es.events.models.OWN_PRIORITY_ANNOTATION`
    when it names a WorkloadPriorityClass and has a ``spec.priority`` (then that number is its priority, as
    Kueue reads it), without it otherwise (a value a user set is dropped)."""
    ref = workload.spec.priority_class_ref
    own = ref is not None and ref.kind == "WorkloadPriorityClass" and workload.spec.priority is not None
    annotations = workload.metadata.annotations
    if own == (models.OWN_PRIORITY_ANNOTATION in annotations):
        return workload
    kept = {k: v for k, v in annotations.items() if k != models.OWN_PRIORITY_ANNOTATION}
    if own:
        kept[models.OWN_PRIORITY_ANNOTATION] = "true"
    meta = msgspec.structs.replace(workload.metadata, annotations=kept)
    return msgspec.structs.replace(workload, metadata=meta)
