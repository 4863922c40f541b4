"""Kueue's own objects as the watcher follows them: ResourceFlavors, Cohorts, ClusterQueues, LocalQueues,
WorkloadPriorityClasses, AdmissionChecks (``active`` from their Active condition), and the Namespaces
whose labels ClusterQueue namespaceSelectors match.

Why this module exists: these objects go on the log as they are (``*Observed``,
:func:`kueue_es.services.watcher.convert.kueue_fact`), and their deletion too,
also a deletion that happened while no watcher ran (found when a relist misses an
object the log holds). Two of them are also read by job conversions: a ``default``
LocalQueue (for jobs without the queue-name label when
``manageJobsWithoutQueueName`` is on) and the WorkloadPriorityClasses a job may
name; :class:`KueueTracker` keeps those in
:class:`kueue_es.services.watcher.inputs.ConversionInputs` and has the jobs
converted again when they change.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

import msgspec

from kueue_es.events import models, types
from kueue_es.jobframework import workloads
from kueue_es.services.kube import objects
from kueue_es.services.watcher import convert
from kueue_es.services.watcher.inputs import ConversionInputs
from kueue_es.services.watcher.kinds import Key
from kueue_es.services.watcher.publishing import Publisher, log_rejection


def terminating_marked(obj: objects.KubeObject) -> objects.KubeObject:
    """An object of :data:`~kueue_es.events.models.FINALIZED_KINDS` with
    :data:`~kueue_es.events.models.TERMINATING_ANNOTATION` set to its ``deletionTimestamp`` when it has one
    (marked for deletion, held by a finalizer), and without it otherwise (a value a user set is dropped)."""
    raw = cast(dict[str, Any], obj)
    meta = dict(raw.get("metadata") or {})
    annotations = dict(meta.get("annotations") or {})
    deleting = meta.get("deletionTimestamp")
    if deleting:
        annotations[models.TERMINATING_ANNOTATION] = str(deleting)
    elif annotations.pop(models.TERMINATING_ANNOTATION, None) is None:
        return obj
    return cast(objects.KubeObject, {**raw, "metadata": {**meta, "annotations": annotations}})


class KueueTracker:
    """Publishes Kueue's objects and their deletions; ``reconvert(trigger=...)`` converts every job again."""

    def __init__(
        self,
        *,
        publisher: Publisher,
        inputs: ConversionInputs,
        reconvert: Callable[..., Awaitable[None]],
        clock: Callable[[], int],
    ) -> None:
        self.publisher, self.inputs, self.reconvert, self.clock = publisher, inputs, reconvert, clock

    async def resynced(self, kind: str, listed: list[objects.KubeObject], *, version: str) -> None:
        """A fresh list of one Kueue kind: the objects the log holds and the list misses are deleted."""
        live = {_key(kind, obj) for obj in listed}
        if kind == "WorkloadPriorityClass":
            for _, name in sorted(self.publisher.known[kind] - live):
                await self._pin_priorities(name, version=version)
        for namespace, name in sorted(self.publisher.known[kind] - live):
            await self.publisher.publish(
                types.ObjectDeleted(kind=kind, namespace=namespace, name=name), version=version
            )
        if kind == "LocalQueue":
            self.inputs.local_queues = set(live)
        if kind == "WorkloadPriorityClass":
            self.inputs.workload_priority_classes = {name for _, name in live}
        selected = False
        if kind == "Namespace":
            for name in sorted(set(self.inputs.namespace_labels) - {name for _, name in live}):
                selected |= self.inputs.namespace_changed(name, None)
            for obj in listed:
                selected |= self.inputs.namespace_changed(objects.name_of(obj), _labels(obj))
        for obj in listed:
            await self.changed(kind, "ADDED", obj, reconvert=False)
        if (
            kind == "WorkloadPriorityClass"
            or (kind == "LocalQueue" and self.inputs.manage_jobs_without_queue_name)
            or selected
        ):
            await self.reconvert(trigger=version)

    async def changed(self, kind: str, change: str, obj: objects.KubeObject, *, reconvert: bool = True) -> None:
        """One Kueue object added, modified or deleted (one of ``FINALIZED_KINDS`` marked for deletion:
        terminating)."""
        meta = objects.meta(obj)
        if kind in models.FINALIZED_KINDS:
            obj = terminating_marked(obj)
        namespace, name = _key(kind, obj)
        version = str(meta.get("resourceVersion") or "")
        parents_moved = kind in ("LocalQueue", "ClusterQueue") and self.inputs.queue_object_changed(
            kind, (namespace, name), None if change == "DELETED" else obj
        )
        if kind == "AdmissionCheck":  # MultiKueue's checks are kueue-es's own (their entries are not reported)
            controller = (cast(dict[str, Any], obj).get("spec") or {}).get("controllerName")
            if change != "DELETED" and controller == models.MULTIKUEUE_CONTROLLER:
                self.publisher.own_checks.add(name)
            else:
                self.publisher.own_checks.discard(name)
        if kind == "WorkloadPriorityClass" and change != "DELETED":
            value = cast(dict[str, Any], obj).get("value")
            if isinstance(value, int):
                self.inputs.workload_priority_values[name] = value  # kept for a deletion (_pin_priorities)
        if change == "DELETED":
            if kind == "WorkloadPriorityClass":  # before its deletion: no cycle sees its workloads without it
                await self._pin_priorities(name, version=version)
            await self.publisher.publish(
                types.ObjectDeleted(kind=kind, namespace=namespace, name=name, uid=meta.get("uid", "")),
                version=version,
            )
        else:
            fact = convert.kueue_fact(cast(dict[str, Any], obj), now_ms=self.clock())
            log_rejection(fact)
            await self.publisher.publish(fact, version=version)
        if reconvert:
            await self._defaults_changed(kind, change, (namespace, name), version=version, obj=obj)
            if parents_moved:  # ConcurrentAdmission: the jobs queued there get (or keep) the parent label
                await self.reconvert(trigger=version)

    async def _defaults_changed(
        self, kind: str, change: str, key: Key, *, version: str, obj: objects.KubeObject | None = None
    ) -> None:
        """Keep the LocalQueues and WorkloadPriorityClasses conversions read; a ``default`` one
        appearing changes what jobs without a queue or a priority class get. A Namespace whose
        labels now make ``managedJobsNamespaceSelector`` select it, or no longer, changes which of
        its jobs are managed: every job is converted again."""
        inputs = self.inputs
        if kind == "Namespace":
            labels = None if change == "DELETED" or obj is None else _labels(obj)
            if inputs.namespace_changed(key[1], labels):
                await self.reconvert(trigger=f"{kind}@{version}")
            return
        if kind == "LocalQueue":
            (inputs.local_queues.discard if change == "DELETED" else inputs.local_queues.add)(key)
        elif kind == "WorkloadPriorityClass":
            classes = inputs.workload_priority_classes
            new = change != "DELETED" and key[1] not in classes
            (classes.discard if change == "DELETED" else classes.add)(key[1])
            if new:
                # a job naming it had no workload (jobframework.workloads.priority): Kueue's reconciler tries
                # again and makes it now
                await self.reconvert(trigger=f"{kind}@{version}")
            return
        else:
            return
        if kind == "LocalQueue" and not inputs.manage_jobs_without_queue_name:
            return  # only jobs without a queue label go to the default LocalQueue
        if key[1] == workloads.DEFAULT_LOCAL_QUEUE and change != "DELETED":
            await self.reconvert(trigger=f"{kind}@{version}")

    async def _pin_priorities(self, name: str, *, version: str) -> None:
        """WorkloadPriorityClass ``name`` was deleted: every workload naming it with no priority of its own keeps
        the class's last value, as Kueue's Workloads keep the ``spec.priority`` its controller last wrote
        (workloadpriorityclass_controller.go does nothing on a deletion). Published as the workload observed
        with that priority, so the fold, replay and every reader see it; without it the fold would take the
        missing class for priority 0 and the admitter would report it Misconfigured."""
        value = self.inputs.workload_priority_values.pop(name, None)
        if value is None:
            return
        for key, workload in sorted(self.publisher.workloads.items()):
            ref = workload.spec.priority_class_ref
            if ref is None or ref.kind != "WorkloadPriorityClass" or ref.name != name:
                continue
            if workload.spec.priority is not None:
                continue
            pinned = msgspec.structs.replace(workload, spec=msgspec.structs.replace(workload.spec, priority=value))
            await self.publisher.publish(
                types.WorkloadObserved(workload=pinned),
                version=f"wpc-deleted.{name}@{version}",
                source=self.publisher.sources.get(key, ""),
            )


def _labels(obj: objects.KubeObject) -> dict[str, str]:
    """An object's ``metadata.labels`` (empty when missing)."""
    labels = objects.meta(obj).get("labels")
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}


def _key(kind: str, obj: objects.KubeObject) -> Key:
    """``(namespace, name)`` of a Kueue object (namespace "" for cluster-scoped kinds)."""
    meta = objects.meta(obj)
    return meta.get("namespace", "") if kind == "LocalQueue" else "", meta.get("name", "")
