"""The job behind a serving pod group's Workload: its StatefulSet or LeaderWorkerSet.

Why this module exists: Kueue's StatefulSet and LeaderWorkerSet reconcilers build the
Workload of a serving group themselves, from the parent object, and mark it as that
object's: an owner reference to it, its UID as the ``kueue.x-k8s.io/job-uid`` label and
the ``kueue.x-k8s.io/job-owner-gvk`` / ``job-owner-name`` annotations
(statefulset_reconciler.go and leaderworkerset_reconciler.go constructWorkload). In
kueue-es the group's Workload is made from its pods, whose first pod is the log's
``owner``; the watcher adds those marks, and every reader that names "the job" of a
Workload (the dispatcher's Events and owner references, ``kueue-es explain`` and
``list``) reads them back here, below every layer, so that all of them agree.
"""

from __future__ import annotations

from kueue_es.events import models

JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
"""Kueue's label with the UID of the job a Workload was made for (controller constants JobUIDLabel)."""

JOB_OWNER_GVK_ANNOTATION = "kueue.x-k8s.io/job-owner-gvk"
"""Kueue's annotation naming the kind of the job that owns a Workload (controller constants JobOwnerGVKAnnotation),
in client-go's ``GroupVersionKind.String()`` form, ``<group>/<version>, Kind=<kind>``."""

JOB_OWNER_NAME_ANNOTATION = "kueue.x-k8s.io/job-owner-name"
"""Kueue's annotation naming that job (controller constants JobOwnerNameAnnotation)."""

COMPONENT_INDEX_ANNOTATION = "kueue.x-k8s.io/component-workload-index"
"""Kueue's annotation with the index of a LeaderWorkerSet group's Workload among its LeaderWorkerSet's
(controller constants ComponentWorkloadIndexAnnotation)."""

SERVING_PARENTS = {
    "apps/v1, Kind=StatefulSet": ("apps/v1", "StatefulSet"),
    "leaderworkerset.x-k8s.io/v1, Kind=LeaderWorkerSet": ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
}
"""The job-owner-gvk values of the parents whose reconciler builds a pod group's Workload, and their
``(apiVersion, kind)``."""


def gvk_string(api_version: str, kind: str) -> str:
    """client-go's ``GroupVersionKind.String()``: ``apps/v1, Kind=StatefulSet``."""
    return f"{api_version}, Kind={kind}"


def serving_parent(workload: models.Workload) -> models.OwnerReference | None:
    """The StatefulSet or LeaderWorkerSet a pod group's Workload was made for, from the marks Kueue's reconciler
    puts on it (:data:`JOB_OWNER_GVK_ANNOTATION` one of :data:`SERVING_PARENTS`, :data:`JOB_OWNER_NAME_ANNOTATION`
    and :data:`JOB_UID_LABEL`, all three set); None for another Workload."""
    meta = workload.metadata
    parent = SERVING_PARENTS.get(meta.annotations.get(JOB_OWNER_GVK_ANNOTATION, ""))
    name, uid = meta.annotations.get(JOB_OWNER_NAME_ANNOTATION, ""), meta.labels.get(JOB_UID_LABEL, "")
    if parent is None or not name or not uid:
        return None
    return models.OwnerReference(api_version=parent[0], kind=parent[1], name=name, uid=uid)


def job_of(workload: models.Workload) -> models.OwnerReference | None:
    """The job a Workload stands for as Kueue names it: a serving group's StatefulSet or LeaderWorkerSet
    (:func:`serving_parent`: the object its reconciler reconciles, records Events on and owns the Workload by),
    else the log's ``owner`` (a Job, an integration's job, a Pod, a plain pod group's first pod); None for a
    Workload made by hand."""
    return serving_parent(workload) or workload.owner
