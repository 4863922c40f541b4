"""What a job's conversion reads of the rest of the cluster, kept in memory and never put on the log.

Why this module exists: converting a Job, a JobSet or a Pod to its Workload
(:mod:`kueue_es.jobframework`) is pure, but it reads the cluster around the job --
the LocalQueues (is there a ``default`` one?), the WorkloadPriorityClasses and
PriorityClasses a job may name, RuntimeClass overheads, the namespace's
LimitRanges, the jobs that own other jobs -- through a
:class:`kueue_es.jobframework.workloads.Context`. :class:`ConversionInputs` keeps
those, as the watches report them, and builds the Context; the runner converts
the jobs again when one of them changes.
"""

from __future__ import annotations

import collections
from collections.abc import Container
from typing import Any, cast

from kueue_es.events import models, slices
from kueue_es.jobframework import integrations, pods, workloads
from kueue_es.services.kube import objects
from kueue_es.services.watcher.kinds import API_VERSIONS, INPUT_KINDS, INTEGRATION_INPUTS, JOB_KINDS, Key


class ConversionInputs:
    """The cluster objects conversions read: PriorityClasses, RuntimeClasses, LimitRanges and what integrations
    read (TrainingRuntimes: ``objects``), the
    LocalQueues and WorkloadPriorityClasses that exist, and the jobs of every kind but Pod seen (by UID: ``owners``,
    what walking a job's controller owners reads of them, :func:`kueue_es.jobframework.workloads.ancestry`), with
    the jobs without the queue-name label the watcher sees apart while ``manageJobsWithoutQueueName`` is off
    (``unqueued_owners``: :meth:`unqueued_owner_changed`); the walk reads both (``owner_view``)."""

    def __init__(
        self,
        *,
        manage_jobs_without_queue_name: bool = False,
        managed_jobs_namespace_selector: models.LabelSelector | None = None,
        external_owners: frozenset[tuple[str, str]] = frozenset(),
        elastic_jobs: bool = slices.GATE_DEFAULT,
        pod_integration_implicit: bool = False,
        finish_orphans: bool = True,
        topology_aware_scheduling: bool = True,
        label_keys_to_copy: frozenset[str] = frozenset(),
        annotations_to_copy: frozenset[str] = frozenset(),
        concurrent_admission: bool = False,
    ) -> None:
        self.manage_jobs_without_queue_name = manage_jobs_without_queue_name
        # what a new Workload copies of its job (manager_config.keys_to_copy)
        self.label_keys_to_copy = label_keys_to_copy
        self.annotations_to_copy = annotations_to_copy
        # pods only as a Deployment's, StatefulSet's or LeaderWorkerSet's (workloads.Context)
        self.pod_integration_implicit = pod_integration_implicit
        self.elastic_jobs = elastic_jobs  # the gate ElasticJobsViaWorkloadSlices (jobframework.slices)
        self.finish_orphans = finish_orphans  # the gate FinishOrphanedWorkloads (workloads.finish_orphans)
        self.topology_aware_scheduling = topology_aware_scheduling  # the gate TopologyAwareScheduling
        self.managed_jobs_namespace_selector = (
            workloads.DEFAULT_MANAGED_JOBS_NAMESPACE_SELECTOR
            if managed_jobs_namespace_selector is None
            else managed_jobs_namespace_selector
        )
        self.namespace_labels: dict[str, dict[str, str]] = {}  # the Namespaces seen: name -> labels
        self.external_owners = external_owners  # integrations.externalFrameworks as (apiVersion, kind)
        self.objects: dict[str, dict[Key, objects.KubeObject]] = {kind: {} for kind in INPUT_KINDS}
        self.local_queues: set[Key] = set()
        # ConcurrentAdmission (the gate, read at start): each LocalQueue's ClusterQueue, and the ClusterQueues with a
        # concurrentAdmissionPolicy, so a Workload made by hand in one is published as a parent (:meth:`ca_parent`)
        self.concurrent_admission = concurrent_admission
        self.queue_cluster_queues: dict[Key, str] = {}
        self.concurrent_cluster_queues: set[str] = set()
        self.workload_priority_classes: set[str] = set()
        self.workload_priority_values: dict[str, int] = {}  # WorkloadPriorityClass name -> its value
        self.owners: dict[str, workloads.Owner] = {}  # UID of a job (not a Pod) seen -> its kind, labels, controller
        # the jobs without the queue-name label, by kind, then UID: those with a job as controller only
        self.unqueued_owners: dict[str, dict[str, workloads.Owner]] = {kind: {} for kind in JOB_KINDS}
        # what the walk reads: a job's own watch first (a label just added there wins over a stale unlabelled one)
        self.owner_view: collections.ChainMap[str, workloads.Owner] = collections.ChainMap(
            self.owners, *self.unqueued_owners.values()
        )

    @property
    def parent_queues(self) -> Container[Key]:
        """The LocalQueues whose Workloads are ConcurrentAdmission parents (:meth:`ca_parent`), as a container."""
        return _ParentQueues(self)

    def ca_parent(self, namespace: str, queue_name: str) -> bool:
        """Whether a Workload queued to LocalQueue ``namespace/queue_name`` is a ConcurrentAdmission parent: the gate
        is on and the queue's ClusterQueue has a ``concurrentAdmissionPolicy`` (Kueue's queue manager
        IsConcurrentAdmissionParent; its workload controller then labels it)."""
        if not self.concurrent_admission:
            return False
        return self.queue_cluster_queues.get((namespace, queue_name), "") in self.concurrent_cluster_queues

    def queue_object_changed(self, kind: str, key: Key, obj: objects.KubeObject | None) -> bool:
        """Keep what :meth:`ca_parent` reads: a LocalQueue's ClusterQueue, a ClusterQueue's policy (``obj`` None:
        deleted). True when, with the gate on, a ClusterQueue opted in or out, or a LocalQueue now feeds an opted-in
        one (or no longer): the jobs queued there are converted again, so their Workloads get the parent label."""
        spec = (cast(dict[str, Any], obj).get("spec") or {}) if obj is not None else {}
        if kind == "LocalQueue":
            before = self.ca_parent(*key)
            if obj is None:
                self.queue_cluster_queues.pop(key, None)
            else:
                self.queue_cluster_queues[key] = str(spec.get("clusterQueue") or "")
            return before != self.ca_parent(*key)
        if kind == "ClusterQueue":
            opted = key[1] in self.concurrent_cluster_queues
            if obj is not None and isinstance(spec.get("concurrentAdmissionPolicy"), dict):
                self.concurrent_cluster_queues.add(key[1])
            else:
                self.concurrent_cluster_queues.discard(key[1])
            return self.concurrent_admission and opted != (key[1] in self.concurrent_cluster_queues)
        return False

    # -- PriorityClasses, RuntimeClasses, LimitRanges ----------------------------------------------

    def replace(self, kind: str, listed: list[objects.KubeObject]) -> None:
        """A fresh list of one input kind."""
        self.objects[kind] = {
            (objects.meta(o).get("namespace", ""), objects.meta(o).get("name", "")): o for o in listed
        }

    def change(self, kind: str, change: str, obj: objects.KubeObject) -> None:
        """One input object added, modified or deleted."""
        key = (str(objects.meta(obj).get("namespace") or ""), objects.name_of(obj))
        if change == "DELETED":
            self.objects[kind].pop(key, None)
        else:
            self.objects[kind][key] = obj

    # -- Namespaces (managedJobsNamespaceSelector) --------------------------------------------------

    def namespace_changed(self, name: str, labels: dict[str, str] | None) -> bool:
        """Keep a Namespace's labels (None: deleted); returns whether the selector's verdict on it changed."""
        before = self.managed_context().namespace_managed(name)
        if labels is None:
            self.namespace_labels.pop(name, None)
        else:
            self.namespace_labels[name] = labels
        return self.managed_context().namespace_managed(name) != before

    # -- the jobs that own other jobs ---------------------------------------------------------------

    def remember_owner(self, kind: str, obj: objects.KubeObject) -> None:
        """Keep what a job's children read of it (its kind, UID, labels and own controller): what it controls
        is part of its workload when it or one of its own owners is managed (the library decides:
        :func:`kueue_es.jobframework.workloads.ancestry`). Every job seen, managed or not. Not a Pod, nor a
        kind run through its pods (a StatefulSet's pods are the workloads:
        :mod:`kueue_es.jobframework.integrations.serving`)."""
        integration = integrations.by_kind(kind)
        if integration is not None and integration.suspend_path is None:
            return
        if kind in JOB_KINDS and kind != "Pod" and (uid := objects.uid_of(obj)):
            self.owners[uid] = workloads.owner_record(
                cast(dict[str, Any], obj), kind=kind, api_version=API_VERSIONS.get(kind, "")
            )

    def forget_owner(self, obj: objects.KubeObject) -> None:
        self.owners.pop(objects.uid_of(obj), None)

    def unqueued_owner_changed(self, kind: str, change: str, obj: objects.KubeObject, *, enabled: bool = True) -> bool:
        """Keep (or, DELETED, forget) a job of ``kind`` without the queue-name label as an owner others walk
        through (:func:`kueue_es.jobframework.workloads.ancestry`): Kueue's walk reads every owner, managed or not,
        so a queue-labelled Job under an unlabelled Job of a labelled JobSet is the JobSet's. Kept only while its
        own controller is a job: an unlabelled owner without one ends the walk, as an owner not seen does, so
        only those cost memory. Returns whether it is kept now and was not before (its children may have been
        converted without it). ``enabled=False``: ``kind``'s integration is off, so the walk goes through the job
        but never takes it as the ancestor (:attr:`workloads.Owner.enabled`), labelled or not."""
        uid = objects.uid_of(obj)
        kept = self.unqueued_owners[kind]
        if not uid:
            return False
        known = uid in kept
        controller = workloads.controller_owner(objects.meta(obj))
        if (
            change == "DELETED"
            or controller is None
            or not pods.is_job_owner(controller.get("apiVersion"), controller.get("kind"))
        ):
            kept.pop(uid, None)
            return False
        kept[uid] = workloads.owner_record(
            cast(dict[str, Any], obj), kind=kind, api_version=API_VERSIONS.get(kind, ""), enabled=enabled
        )
        return not known

    def unqueued_owners_listed(self, kind: str, listed: list[objects.KubeObject], *, enabled: bool = True) -> None:
        """A fresh list of the jobs of ``kind`` without the queue-name label, or of every job of a kind whose
        integration is off (``enabled=False``; :meth:`unqueued_owner_changed`)."""
        self.unqueued_owners[kind].clear()  # the same dict: ``owner_view`` reads it
        for obj in listed:
            self.unqueued_owner_changed(kind, "ADDED", obj, enabled=enabled)

    # -- the Context ------------------------------------------------------------------------------

    def managed_context(self) -> workloads.Context:
        """Only what tells whether a job is managed at all."""
        return workloads.Context(
            manage_jobs_without_queue_name=self.manage_jobs_without_queue_name,
            managed_jobs_namespace_selector=self.managed_jobs_namespace_selector,
            namespace_labels=self.namespace_labels,
            owners=self.owner_view,
            external_owners=self.external_owners,
            pod_integration_implicit=self.pod_integration_implicit,
        )

    def context(
        self, wl_key: Key, *, previous: models.Workload | None, previous_reserved: bool = False
    ) -> workloads.Context:
        """What converting the job of workload ``wl_key`` reads; ``previous``: the workload published for it,
        ``previous_reserved``: whether its Workload object holds quota."""
        return workloads.Context(
            manage_jobs_without_queue_name=self.manage_jobs_without_queue_name,
            managed_jobs_namespace_selector=self.managed_jobs_namespace_selector,
            namespace_labels=self.namespace_labels,
            local_queues=self.local_queues,
            workload_priority_classes=self.workload_priority_classes,
            priority_classes=self._priority_classes(),
            owners=self.owner_view,
            runtime_classes=self._runtime_classes(),
            limit_ranges=self._limit_ranges(wl_key[0]),
            previous=previous,
            previous_reserved=previous_reserved,
            objects={kind: self.objects[kind] for kind in INTEGRATION_INPUTS},
            external_owners=self.external_owners,
            elastic_jobs=self.elastic_jobs,
            pod_integration_implicit=self.pod_integration_implicit,
            topology_aware_scheduling=self.topology_aware_scheduling,
            label_keys_to_copy=self.label_keys_to_copy,
            annotations_to_copy=self.annotations_to_copy,
            concurrent_parent_queues=self.parent_queues,
        )

    def pod_inputs(self, namespace: str) -> tuple[dict[str, Any], list[Any]]:
        """What adjusts a pod template in ``namespace`` before its requests count: the RuntimeClasses' fixed
        overheads by name and the namespace's LimitRange items (:mod:`kueue_es.jobframework.adjust`); read also
        for Workloads made by hand (:mod:`kueue_es.services.watcher.standalone`)."""
        return self._runtime_classes(), self._limit_ranges(namespace)

    def _priority_classes(self) -> dict[str, workloads.PriorityClass]:
        found = {}
        for (_, name), obj in self.objects["PriorityClass"].items():
            pc = cast(objects.PriorityClass, obj)
            value = workloads.parse_int(pc.get("value"))
            if value is not None:
                found[name] = workloads.PriorityClass(
                    name=name, value=value, global_default=pc.get("globalDefault") is True
                )
        return found

    def _runtime_classes(self) -> dict[str, Any]:
        return {
            name: fixed
            for (_, name), obj in self.objects["RuntimeClass"].items()
            if isinstance(fixed := _field(obj, "overhead", "podFixed"), dict)
        }

    def _limit_ranges(self, namespace: str) -> list[Any]:
        return [
            item
            for (ns, _), obj in sorted(self.objects["LimitRange"].items())
            if ns == namespace and isinstance(limits := _field(obj, "spec", "limits"), list)
            for item in limits
        ]


def _field(obj: Any, *path: str) -> Any:
    """``obj[path[0]][path[1]]...``, or None where a step is missing or not a mapping."""
    for step in path:
        obj = obj.get(step) if isinstance(obj, dict) else None
    return obj


class _ParentQueues(Container[Key]):
    """``(namespace, LocalQueue) in`` it: :meth:`ConversionInputs.ca_parent` (what a job's conversion asks, read
    when asked: no set of every LocalQueue built per job)."""

    def __init__(self, inputs: ConversionInputs) -> None:
        self.inputs = inputs

    def __contains__(self, key: object) -> bool:
        return isinstance(key, tuple) and len(key) == 2 and self.inputs.ca_parent(str(key[0]), str(key[1]))
