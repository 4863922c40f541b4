"""The jobs Kueue queues, as the watcher follows them: batch/v1 Jobs, JobSets and Pods to workloads.

Why this module exists: a job's workload must follow the job -- converted again
when the job changes, when what the conversion reads changes (a ``default``
LocalQueue, a PriorityClass: :mod:`kueue_es.services.watcher.inputs`), deleted
when the job goes or stops being managed (but kept while its queue-name label is
off, as Kueue's reconciler then ignores the job), and left alone while it runs (the
dispatcher has written the flavor's node selector into its template).
:class:`JobTracker` keeps the jobs of the three kinds and does that, with the
conversion itself in :mod:`kueue_es.jobframework`; pod groups are
:class:`kueue_es.services.watcher.pod_tracking.PodGroups`, and what a job's
progress reports is :class:`kueue_es.services.watcher.reporting.ProgressReporter`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, cast

import msgspec
import structlog

from kueue_es.events import job_owners, manifests, models, slices, types
from kueue_es.jobframework import integrations, jobs, pods, prebuilt, workloads
from kueue_es.jobframework import slices as job_slices
from kueue_es.jobframework.annotations import DISPATCHER_FIELD_MANAGER, IS_GROUP_WORKLOAD_ANNOTATION, PODSET_LABEL
from kueue_es.jobframework.integrations import ray, serving
from kueue_es.services.kube import errors as kube_errors
from kueue_es.services.kube import objects
from kueue_es.services.watcher import prebuilt_tracking
from kueue_es.services.watcher.inputs import ConversionInputs
from kueue_es.services.watcher.kinds import API_VERSIONS, JOB_KINDS, Key
from kueue_es.services.watcher.pod_tracking import PodGroups
from kueue_es.services.watcher.prebuilt_tracking import PrebuiltWorkloads
from kueue_es.services.watcher.publishing import OwnPriority, Publisher, log_rejection
from kueue_es.services.watcher.reporting import ProgressReporter

log = structlog.get_logger(__name__)

#: The kinds Kueue lets be elastic jobs (validation.go supportedElasticJobGVKs).
ELASTIC_KINDS = ("Job", "RayCluster", "RayJob", "RayService")
ORPHAN_FINALIZER = "orphan"
"""The finalizer a delete with ``propagationPolicy: Orphan`` puts on the object (metav1.FinalizerOrphanDependents):
the garbage collector takes its references off the dependents, then lets it go."""
DELETED_OBJECTS_KEPT = 10_000
"""The most Workload object UIDs :attr:`JobTracker.deleted_objects` keeps: an object marked for deletion is
held by Kueue's finalizer only until its job is stopped, so its DELETED follows soon."""

_CONVERTERS: dict[str, Callable[..., types.Fact | None]] = {
    "Job": jobs.job_facts,
    "Pod": pods.pod_facts,
}


def _convert(kind: str, obj: objects.KubeObject, *, now_ms: int, context: workloads.Context) -> types.Fact | None:
    """The fact a job of ``kind`` stands for: its own converter, or the table-driven integration's."""
    convert = _CONVERTERS.get(kind)
    if convert is not None:
        return convert(obj, now_ms=now_ms, context=context)
    integration = integrations.registry()[kind]
    return integrations.facts(integration, obj, now_ms=now_ms, context=context)


class JobTracker:
    """Turns the Jobs, JobSets and Pods seen into their workloads' facts, through ``publisher``."""

    def __init__(
        self,
        *,
        publisher: Publisher,
        inputs: ConversionInputs,
        reporter: ProgressReporter,
        clock: Callable[[], int],
        read_workload: Callable[[str, str], Awaitable[objects.KubeObject | None]] | None = None,
        read_job: Callable[[str, str, str], Awaitable[objects.KubeObject | None]] | None = None,
    ) -> None:
        self.publisher, self.inputs, self.reporter, self.clock = publisher, inputs, reporter, clock
        # the Workload object (namespace, name) as the API server holds it now, None when there is none: a list of
        # jobs that no longer has a job tells by it whether its Workload outlived it (:meth:`_left_orphaned`)
        self.read_workload = read_workload
        # the job (kind, namespace, name) as the API server holds it now: a Workload object deleted while the
        # watched job is not marked for deletion may be the garbage collector's, ahead of the job's MODIFIED
        self.read_job = read_job
        self.objects: dict[str, dict[Key, objects.KubeObject]] = {kind: {} for kind in JOB_KINDS}
        # the kinds listed since this tracker started: until StatefulSets are, a workload the log holds on hold
        # (its pods all gone) cannot be told from one whose StatefulSet went while no watcher ran
        self.listed: set[str] = set()
        # Elastic slices (SEMANTICS-ADVANCED D.2): what their Workload objects say, by workload key.
        # jobs whose Workload object was deleted by hand: when (ms), for their new one's creation time
        self.recreated_at: dict[Key, int] = {}
        # Jobs refused (ObjectRejected) with no workload yet, by (kind, namespace, name): the workload Kueue makes
        # once the cause is gone (a WorkloadPriorityClass created) is created then and queues from then.
        self.refused: set[tuple[str, str, str]] = set()
        # the UIDs of the Workload objects whose deletion was published (at most DELETED_OBJECTS_KEPT)
        self.deleted_objects: dict[str, None] = {}
        self.slice_reserved: dict[str, bool] = {}
        self.slice_finished: dict[str, bool] = {}
        # what each job's Workload object holding quota (QuotaReserved) says, by workload key: Kueue's reconciler
        # compares a suspended job with it (EquivalentToWorkload) before it may rewrite the Workload
        self.held: dict[Key, HeldWorkload] = {}
        # Pods' workloads whose Workload object was deleted by hand: workload key -> the UIDs of their pods, which
        # the dispatcher deletes (Kueue's Pod.Stop); while one of them is left no workload is made for them again
        self.doomed: dict[Key, set[str]] = {}
        # children of managed jobs reported running (ChildJobObserved), by UID: reported again only once they were
        # seen not running (suspended, finished, deleted), so a child running under an admitted ancestor is one fact
        self.children_running: dict[str, None] = {}
        # the UID of the Workload object last seen for each workload key (its deletion by this watcher's own
        # decision, a workload no longer matching its job, is then not taken for a deletion by hand)
        self.object_uids: dict[Key, str] = {}
        # the UIDs of the jobs seen being deleted with the ``orphan`` finalizer (until their DELETED)
        self.orphaning: set[str] = set()
        # the workloads of jobs whose queue-name label was taken off (they left the job watch, which lists by it):
        # workload key -> (the job's kind, its UID). Kueue's reconciler ignores such a job, so its Workload stays
        # as it is until the job is deleted (:meth:`queue_label_removed`, :meth:`unqueued_job_changed`)
        self.unqueued: dict[Key, tuple[str, str]] = {}
        # the UIDs of the workloads finished OwnerNotFound as their job's deletion began (:meth:`_finalize`;
        # at most DELETED_OBJECTS_KEPT): each once
        self.finalized: dict[str, None] = {}
        self.groups = PodGroups(
            pods=self.objects["Pod"],
            publisher=publisher,
            inputs=inputs,
            reporter=reporter,
            clock=clock,
            doomed=self.doomed,
            parents=self.objects["LeaderWorkerSet"],
            statefulsets=self.objects["StatefulSet"],
        )
        # jobs naming a prebuilt Workload, and the Workload objects they name (kueue.x-k8s.io/prebuilt-workload-name)
        self.prebuilt = PrebuiltWorkloads(
            publisher=publisher,
            inputs=inputs,
            reporter=reporter,
            jobs=self.objects,
            managed=self._managed,
            convert=lambda kind, obj, now_ms, context: _convert(kind, obj, now_ms=now_ms, context=context),
            group_members=self.groups.members,
            clock=clock,
        )

    # -- watch events -----------------------------------------------------------------------------

    async def changed(self, kind: str, change: str, obj: objects.KubeObject) -> None:
        """One job added, modified or deleted."""
        key = (objects.namespace_of(obj), objects.name_of(obj))
        version = objects.resource_version(obj)
        before = self.objects[kind].get(key)
        if kind == "Pod" and before is not None and (old_group := pods.group_name(before)) != pods.group_name(obj):
            self.groups.index(key, old_group, present=False)  # Kueue forbids this; keep the old group right anyway
            await self._sync_group((key[0], old_group), version=version)
        orphaning = _orphaning(obj) or objects.uid_of(obj) in self.orphaning
        if change == "DELETED":
            self.orphaning.discard(objects.uid_of(obj))
            self.objects[kind].pop(key, None)
            self.children_running.pop(objects.uid_of(obj), None)
            self.inputs.forget_owner(obj)
            # a job or pod refused (ObjectRejected) and never converted since: the fold forgets its rejection
            await self.publisher.rejected_gone(kind, *key, uid=objects.uid_of(obj), version=version)
            if kind == "Pod" and self.doomed:
                self._forget_doomed(objects.uid_of(obj))
        else:
            if orphaning:
                self.orphaning.add(objects.uid_of(obj))
            self.objects[kind][key] = obj
            self.inputs.remember_owner(kind, obj)
        group = pods.group_name(obj) if kind == "Pod" else ""
        named = prebuilt_tracking.names(kind, obj) or (before is not None and prebuilt_tracking.names(kind, before))
        if named:  # a job adopting a prebuilt Workload (a pod of a group: its group is looked at below)
            if change == "DELETED" and not group:
                await self.prebuilt.job_deleted(kind, obj, version=version)
                return
            renamed = self.prebuilt.index(kind, obj, present=change != "DELETED")
            if renamed is not None and change != "DELETED":
                # Kueue's webhook forbids it; the Workload it named is looked at again
                await self.prebuilt.sync(renamed, trigger=version)
        if kind == "Pod":
            await self.groups.progress(obj, version=version)
        if group:
            if change == "DELETED":
                self.groups.member_deleted((key[0], group), obj)
            self.groups.index(key, group, present=change != "DELETED")
            await self._sync_group((key[0], group), version=version)
        elif change == "DELETED" and self._queue_label_removed(kind, obj):
            self.queue_label_removed(kind, obj)
        elif change == "DELETED":
            for wl_key in self._workload_keys(kind, obj):
                if kind != "Pod" and self.publisher.sources.get(wl_key) == "Pod":
                    # a StatefulSet's group workload, made from its pods and named as the StatefulSet's would be:
                    # it goes with the last of its pods (:meth:`_sync_group` below), as the garbage collector
                    # deletes Kueue's once its StatefulSet and pods are gone, not now to be made again from them
                    continue
                if await self._left_orphaned(kind, obj, wl_key, orphaning=orphaning):
                    continue  # its Workload object stays, finished OwnerNotFound
                # when it was seen gone: the log's readers (kueue-es explain) tell the deletion's time, not a guess
                await self.publisher.delete_workload(
                    wl_key, version=version, uid=self._log_uid(wl_key, objects.uid_of(obj)), at_ms=self.clock()
                )
        else:
            for wl_key in self._workload_keys(kind, obj):
                self.unqueued.pop(wl_key, None)  # its queue-name label is back (or was never off)
            await self._sync_job(kind, obj, version=version)
        if kind == "RayCluster" and self.inputs.elastic_jobs:
            await self.owner_of_cluster_changed(obj, version=version)
        if kind == "StatefulSet" and (uid := objects.uid_of(obj)):
            # scaled to or from zero: its serving group's workload is held or let go (:meth:`_statefulset_hold`);
            # deleted: the workload goes once its pods have (:meth:`_parent_keeps`; the garbage collector's)
            group_key = (key[0], serving.statefulset_workload_name(key[1], uid))
            await self._sync_group(group_key, version=version)
        if kind == "LeaderWorkerSet" and (uid := objects.uid_of(obj)):
            # scaled in or deleted: the workloads of the groups it no longer wants go once their pods have
            # (leaderworkerset_reconciler.go filterWorkloads deletes them; the garbage collector, with it); seen
            # after its groups' pods: their workloads are marked as its now
            for group_key in self._lws_groups(uid=uid, lws=obj if change != "DELETED" else None):
                await self._sync_group(group_key, version=version)

    async def resynced(self, kind: str, listed: list[objects.KubeObject], *, version: str) -> None:
        """A fresh list of one job kind: replace what is kept, delete the workloads gone, convert the rest."""
        kept = self.objects[kind]
        # the jobs seen before this list, by workload key, and those seen being deleted with the orphan finalizer:
        # their workloads outlive them
        last_seen = {wl_key: obj for obj in kept.values() for wl_key in self._workload_keys(kind, obj)}
        orphaning = {wl_key: obj for wl_key, obj in last_seen.items() if objects.uid_of(obj) in self.orphaning}
        for obj in kept.values():
            self.inputs.forget_owner(obj)
            self.orphaning.discard(objects.uid_of(obj))
        kept.clear()  # the same dict: PodGroups reads the pods through it
        self.orphaning.update(objects.uid_of(obj) for obj in listed if _orphaning(obj))
        kept.update({(objects.namespace_of(o), objects.name_of(o)): o for o in listed})
        for obj in listed:
            self.inputs.remember_owner(kind, obj)
        if kind == "Pod":
            self.groups.reindex()
        self.prebuilt.reindex(kind)
        live = {k for obj in listed if self._managed(kind, obj) for k in self._workload_keys(kind, obj)}
        gone = {k for k in self.publisher.known["Workload"] if self.publisher.sources.get(k, "Job") == kind} - live
        gone -= set(self.publisher.orphaned)  # their Workload objects outlived their jobs: they go with them
        gone -= set(self.unqueued)  # their jobs lost the queue-name label: Kueue ignores them, their Workloads stay
        if kind == "Pod":  # a StatefulSet or LeaderWorkerSet keeps its group's workload with no pod left
            gone = {
                k for k in gone if not self._held(k) and not self._hold_unconfirmed(k) and not self._parent_keeps(k)
            }
        for key in sorted(gone):
            # a job gone while no watch told (its DELETED, maybe its orphaning, unseen): whether its Workload
            # outlives it is read off the Workload object (:meth:`_left_orphaned`)
            if await self._left_orphaned(kind, last_seen.get(key), key, orphaning=key in orphaning, listed=True):
                continue
            await self.publisher.delete_workload(key, version=version)
        self.listed.add(kind)
        await self._convert_all(kinds=(kind,), trigger="")
        if kind == "StatefulSet":
            # the held workloads the log knows, and the StatefulSets' groups' with no pod now, their StatefulSets
            # now listed: still held or kept, let go (scaled up while no watcher ran) or deleted with their pods
            # (the StatefulSet went meanwhile), whatever was listed first
            held = {k for k, wl in self.publisher.workloads.items() if wl.on_hold}
            for group_key in sorted(held | set(self._parented_groups("StatefulSet"))):
                await self._sync_group(group_key, version=f"{version}~held")
        if kind == "LeaderWorkerSet":
            # the groups the log knows with no pod now: kept while their LeaderWorkerSet wants them, else deleted;
            # and those made before their LeaderWorkerSet was known: marked as its now
            keys = set(self._parented_groups("LeaderWorkerSet"))
            for lws in listed:
                keys.update(self._lws_groups(uid=objects.uid_of(lws), lws=lws))
            for group_key in sorted(keys):
                await self._sync_group(group_key, version=f"{version}~lws")

    async def reconvert(self, *, trigger: str) -> None:
        """Convert every job kept again: what conversions read has changed."""
        await self._convert_all(kinds=JOB_KINDS, trigger=trigger)

    async def owner_seen(self, uid: str, *, trigger: str) -> None:
        """Convert again the jobs (not pods) whose controller has ``uid``: an owner they walk through was not
        known when they were converted (:meth:`ConversionInputs.unqueued_owner_changed`), so one may have got a
        Workload of its own that is its ancestor's, or none where it should."""
        for kind in JOB_KINDS:
            if kind == "Pod":
                continue
            for key in sorted(self.objects[kind]):
                obj = self.objects[kind][key]
                controller = workloads.controller_owner(objects.meta(obj))
                if controller is not None and controller.get("uid") == uid:
                    await self._sync_job(kind, obj, version=f"{objects.resource_version(obj)}~{trigger}")

    async def _convert_all(self, *, kinds: tuple[str, ...], trigger: str) -> None:
        for kind in kinds:
            for key in sorted(self.objects[kind]):
                obj = self.objects[kind].get(key)
                if obj is None or (kind == "Pod" and pods.group_name(obj)):
                    continue
                version = objects.resource_version(obj)
                await self._sync_job(kind, obj, version=f"{version}~{trigger}" if trigger else version)
            if kind == "Pod":
                for group_key in sorted(self.groups.groups):
                    await self._sync_group(group_key, version=trigger or self.groups.version_of(group_key))

    # -- jobs whose queue-name label was taken off ---------------------------------------------------

    def _queue_label_removed(self, kind: str, obj: objects.KubeObject) -> bool:
        """Whether a DELETED event of the job watch is a job (not a Pod) that left it as its queue-name label was
        taken off (the watch lists by that label while ``manageJobsWithoutQueueName`` is off), not one deleted: a
        deleted job carries its label to the end."""
        return (
            kind != "Pod"
            and not self.inputs.manage_jobs_without_queue_name
            and not (objects.meta(obj).get("labels") or {}).get(workloads.QUEUE_LABEL)
        )

    def queue_label_removed(self, kind: str, obj: objects.KubeObject) -> None:
        """Job ``obj`` of ``kind`` lost its queue-name label (``kubectl label job NAME kueue.x-k8s.io/queue-name-``,
        which Kueue's webhook allows while it is suspended: jobframework/validation.go validateUpdateForQueueName):
        Kueue's reconciler then ignores it (reconciler.go ReconcileGenericJob: "queue-name label is not set,
        ignoring the job", before ensureOneWorkload), so its Workload stays as it is, pending in its ClusterQueue,
        until the job is deleted (the garbage collector's part: :meth:`unqueued_job_changed`) or labelled again
        (the job watch sees it again)."""
        for wl_key in self._workload_keys(kind, obj):
            known = wl_key in self.publisher.known["Workload"] and self.publisher.sources.get(wl_key, "Job") == kind
            if known and wl_key not in self.unqueued:
                self.unqueued[wl_key] = (kind, objects.uid_of(obj))
                log.info(
                    "job_queue_name_removed",
                    workload=f"{wl_key[0]}/{wl_key[1]}",
                    job=f"{kind} {wl_key[0]}/{objects.name_of(obj)}",
                )

    async def unqueued_job_changed(self, kind: str, change: str, obj: objects.KubeObject) -> None:
        """A job of ``kind`` without the queue-name label added, modified or deleted (the watcher's watch of those,
        ``!kueue.x-k8s.io/queue-name``): one whose workload the log holds is remembered as one Kueue ignores
        (:meth:`queue_label_removed`; also after a restart, as it is listed), and its workload is deleted once the
        job is (the garbage collector deletes the Workload its job owns). Leaving that watch with the label
        (labelled again) it is the job watch's again."""
        if kind == "Pod":
            return
        labelled = bool((objects.meta(obj).get("labels") or {}).get(workloads.QUEUE_LABEL))
        keys = [k for k, (k_kind, uid) in self.unqueued.items() if k_kind == kind and uid == objects.uid_of(obj)]
        if change != "DELETED":
            self.queue_label_removed(kind, obj)
            return
        for wl_key in keys:
            del self.unqueued[wl_key]
            if not labelled:
                log.info(
                    "unqueued_job_deleted", workload=f"{wl_key[0]}/{wl_key[1]}", job=f"{kind} {objects.name_of(obj)}"
                )
                await self.publisher.delete_workload(
                    wl_key,
                    version=objects.resource_version(obj),
                    uid=self._log_uid(wl_key, objects.uid_of(obj)),
                    at_ms=self.clock(),
                )

    async def unqueued_jobs_listed(self, kind: str, listed: list[objects.KubeObject], *, version: str) -> None:
        """A fresh list of the jobs of ``kind`` without the queue-name label: those whose workload the log holds
        are remembered (:meth:`queue_label_removed`); the workloads of such jobs remembered before that are
        neither listed nor seen labelled again are deleted (their jobs were deleted while no watch told)."""
        if kind == "Pod":
            return
        uids = {objects.uid_of(obj) for obj in listed}
        labelled = {objects.uid_of(obj) for obj in self.objects[kind].values()}
        for wl_key, (k_kind, uid) in sorted(self.unqueued.items()):
            if k_kind != kind or uid in uids:
                continue
            del self.unqueued[wl_key]
            if uid not in labelled:
                await self.publisher.delete_workload(wl_key, version=version, uid=self._log_uid(wl_key, uid))
        for obj in listed:
            self.queue_label_removed(kind, obj)

    # -- one job ----------------------------------------------------------------------------------

    async def workload_name_freed(self, obj: objects.KubeObject) -> None:
        """A Workload object was deleted: a pod group its name held back (it was no group's Workload) is looked at
        again, as Kueue requeues the group a deleted Workload blocked (pod event_handlers.go
        queueReconcileForBlockedPodGroup)."""
        group_key = (objects.namespace_of(obj), objects.name_of(obj))
        if group_key in self.groups.groups and group_key not in self.publisher.workloads:
            await self._sync_group(group_key, version=f"freed@{objects.resource_version(obj)}")

    async def _sync_group(self, group_key: Key, *, version: str) -> None:
        """Publish what a pod group stands for now: the prebuilt Workload its pods name, adopted
        (:meth:`PrebuiltWorkloads.sync_group`; also once its pods are gone: deleted with them), else its own
        (:meth:`PodGroups.sync`). A pod naming another Workload than its group is refused, as Kueue's pod webhook
        refuses it at creation, and the group gets none."""
        members = self.groups.members(group_key)
        for pod in members:
            try:
                pods.check_prebuilt_group(cast(Mapping[str, Any], pod))
            except manifests.ManifestError as err:
                fact = workloads.rejected(cast(Mapping[str, Any], pod), err, now_ms=self.clock())
                log_rejection(fact)
                await self.publisher.publish(fact, version=version, source="Pod")
                return
        if await self._statefulset_hold(group_key, members, version=version):
            return
        if not members and self._parent_keeps(group_key):
            return  # its StatefulSet or LeaderWorkerSet still wants the group: the Workload waits for the pods made again
        known = self.publisher.workloads.get(group_key)
        adopted = (
            known is not None and known.owner is not None and known.owner.kind == "Pod" and prebuilt.is_adopted(known)
        )
        if adopted or any(prebuilt_tracking.names("Pod", pod) for pod in members):
            if self.inputs.managed_context().namespace_managed(group_key[0]):
                await self.prebuilt.sync_group(group_key, version=version)
            return
        await self.groups.sync(group_key, version=version)

    def _statefulset_of(self, group_key: Key) -> objects.KubeObject | None:
        """The StatefulSet whose serving group is ``group_key`` (its Workload's name, statefulset GetWorkloadName),
        or None (a scan of the namespace's StatefulSets kept)."""
        for (namespace, name), sts in self.objects.get("StatefulSet", {}).items():
            if (
                namespace == group_key[0]
                and serving.statefulset_workload_name(name, objects.uid_of(sts)) == group_key[1]
            ):
                return sts
        return None

    def _held(self, group_key: Key) -> bool:
        """Whether ``group_key`` is the serving group of a managed StatefulSet scaled to zero (its workload stays)."""
        sts = self._statefulset_of(group_key)
        if sts is None or not self._managed("StatefulSet", sts):
            return False
        try:
            return bool(serving.statefulset_hold(cast(Mapping[str, Any], sts)))
        except manifests.ManifestError:
            return False

    def _hold_unconfirmed(self, group_key: Key) -> bool:
        """Whether ``group_key``'s workload is on hold as the log has it while StatefulSets are not listed yet (a
        restarted watcher that lists pods first): kept until they are, when :meth:`resynced` looks at it again."""
        known = self.publisher.workloads.get(group_key)
        return known is not None and bool(known.on_hold) and "StatefulSet" not in self.listed

    def _lws_groups(self, *, uid: str, lws: objects.KubeObject | None = None) -> list[Key]:
        """The pod groups the log has a workload for that the marks of the LeaderWorkerSet of UID ``uid`` name
        (:func:`~kueue_es.events.job_owners.serving_parent`); with ``lws`` (that LeaderWorkerSet) also the pod
        groups kept whose first pod is in one of its groups
        (:func:`~kueue_es.jobframework.integrations.serving.lws_owner`), marked or not."""
        found = set()
        for group_key, known in self.publisher.workloads.items():
            parent = job_owners.serving_parent(known)
            if parent is not None and parent.kind == "LeaderWorkerSet" and parent.uid == uid:
                found.add(group_key)
        if lws is not None:
            for group_key, names in self.groups.groups.items():
                pod = self.objects["Pod"].get((group_key[0], min(names))) if names else None
                if pod is not None and serving.lws_owner(cast(Mapping[str, Any], pod), cast(Mapping[str, Any], lws)):
                    found.add(group_key)
        return sorted(found)

    def _parent_keeps(self, group_key: Key) -> bool:
        """Whether ``group_key``'s workload is a StatefulSet's or LeaderWorkerSet's group's that its parent still
        wants (:func:`~kueue_es.jobframework.integrations.serving.parent_wants_group`), so it stays with the group's
        pods all gone (deleted by hand, a group restart) and their pods made again are started on it, as Kueue's
        Workload, owned by that parent, stays. While that kind is not listed yet (a restarted watcher that lists
        pods first) it is kept until it is, when :meth:`resynced` looks at it again."""
        known = self.publisher.workloads.get(group_key)
        parent = job_owners.serving_parent(known) if known is not None else None
        if known is None or parent is None:
            return False
        if parent.kind not in self.listed:
            return True
        obj = self.objects[parent.kind].get((group_key[0], parent.name))
        return serving.parent_wants_group(known, cast(Mapping[str, Any], obj) if obj is not None else None)

    def _parented_groups(self, kind: str) -> list[Key]:
        """The pod groups the log has a workload for whose marks name a parent of ``kind`` (StatefulSet,
        LeaderWorkerSet)."""
        return sorted(
            key
            for key, known in self.publisher.workloads.items()
            if (parent := job_owners.serving_parent(known)) is not None and parent.kind == kind
        )

    async def _statefulset_hold(self, group_key: Key, members: list[objects.KubeObject], *, version: str) -> bool:
        """Hold or let go the workload of a StatefulSet's serving group, as Kueue's StatefulSet reconciler does
        (statefulset_reconciler.go reconcileWorkload): scaled to zero, the workload the log holds is observed with
        ``on_hold`` (the admitter releases its reservation, reason OnHold, and does not queue it) and stays while
        its pods go, instead of being deleted with them; scaled up again before its pods come, observed without
        it (clearOnHold: queued again, the same workload). Returns whether that is all the group stands for now
        (else its pods are converted as any group's, which clears the hold too)."""
        if group_key not in self.publisher.known["Workload"] or self.publisher.sources.get(group_key) != "Pod":
            return False
        known = self.publisher.workloads.get(group_key)
        sts = self._statefulset_of(group_key)
        if known is None or sts is None:
            return False
        hold = serving.STATEFULSET_ON_HOLD_MESSAGE if self._held(group_key) else ""
        if hold or (known.on_hold and not members):
            if known.on_hold != hold:
                await self._publish_hold(group_key, known, sts, hold, version=version)
            return True
        if known.on_hold:
            # scaled up again before the pods of the scale-down were all gone: the group's own conversion publishes
            # nothing for pods that still run, so the hold is let go here (reconcileWorkload's shouldClearOnHold:
            # replicas above zero and on hold, whatever the pods); the pods are then converted as any group's
            await self._publish_hold(group_key, known, sts, "", version=version)
        return False

    async def _publish_hold(
        self, group_key: Key, known: models.Workload, sts: objects.KubeObject, hold: str, *, version: str
    ) -> None:
        """Observe the StatefulSet's group workload ``known`` on hold (``hold``: the message) or let go ("")."""
        observed = msgspec.structs.replace(known, on_hold=hold)
        if not hold:
            # scaled up to another size: the workload let go counts the pods to come, not those it had
            # (its quota was released with the hold, so nothing keeps the old count)
            try:
                observed = serving.statefulset_resized(observed, cast(Mapping[str, Any], sts))
            except manifests.ManifestError:
                pass  # not a count: left to the StatefulSet's own rejection
            # and in the LocalQueue its StatefulSet names now (relabelled while scaled to zero: reconcileWorkload
            # moves the Workload once replicas are above zero again)
            observed = serving.statefulset_requeued(observed, cast(Mapping[str, Any], sts))
        fact = types.WorkloadObserved(workload=observed)
        await self.publisher.publish(fact, version=f"{version}.hold", source="Pod")
        log.info("statefulset_workload_hold", workload=f"{group_key[0]}/{group_key[1]}", on_hold=bool(hold))
        if hold:
            # not admitted any more: Kueue's PodsReady is WaitForStart (generatePodsReadyCondition), so
            # the pods of the scale-up are Started, not Recovered
            await self.reporter.report_pods_ready(group_key, started=False, ready=False, version=version)

    async def _job_on_hold(self, kind: str, obj: objects.KubeObject, wl_key: Key, *, version: str) -> bool:
        """Whether the job asks for its workload to be put on hold (the integration's ``on_hold``: a RayJob whose
        KubeRay validation failed) and has one: then nothing else is done for it, as Kueue's reconciler returns
        right after its on-hold step (reconciler.go ReconcileGenericJob, JobWithOnHold). While that workload's
        Workload object holds quota (:attr:`held`), it is observed with ``on_hold`` once: the admitter releases the
        reservation, reason OnHold, and does not queue it again (UnsetQuotaReservationWithCondition). A job with
        no workload yet gets one first (ensureOneWorkload comes before)."""
        integration = integrations.by_kind(kind) if kind not in _CONVERTERS else None
        if integration is None or integration.on_hold is None or not integration.on_hold(obj):
            return False
        known = self.publisher.workloads.get(wl_key)
        if known is None or wl_key not in self.publisher.known["Workload"]:
            return False
        if not known.on_hold and wl_key in self.held:
            observed = msgspec.structs.replace(known, on_hold=integrations.JOB_ON_HOLD_MESSAGE)
            await self.publisher.publish(
                types.WorkloadObserved(workload=observed), version=f"{version}.hold", source=kind
            )
            log.info("job_workload_hold", workload=f"{wl_key[0]}/{wl_key[1]}", job=f"{kind} {objects.name_of(obj)}")
        return True

    async def _sync_job(self, kind: str, obj: objects.KubeObject, *, version: str) -> None:
        """Publish what a Job, a JobSet or a single Pod stands for now."""
        wl_key = self._workload_key(kind, obj)
        if wl_key is None:
            return
        if kind != "Pod" and objects.meta(obj).get("deletionTimestamp"):
            await self._finalize(kind, obj, version=version)
            return
        if prebuilt_tracking.names(kind, obj):
            if self.inputs.managed_context().namespace_managed(wl_key[0]):
                await self.prebuilt.sync_job(kind, obj, version=version)  # it adopts that Workload: no one made for it
            return
        if kind == "Pod" and objects.uid_of(obj) in self.doomed.get(wl_key, ()):
            return  # its Workload was deleted by hand: the pod is being deleted, not given a new one
        if not self.inputs.managed_context().namespace_managed(objects.namespace_of(obj)):
            return  # Kueue's reconciler ignores the job; a workload it had stays as it is (managedJobsNamespaceSelector)
        await self.child_seen(kind, obj)
        now_ms = self.clock()
        context = self.inputs.context(
            wl_key, previous=self.publisher.workloads.get(wl_key), previous_reserved=wl_key in self.held
        )
        fact = _convert(kind, obj, now_ms=now_ms, context=context)
        if fact is not None and await self._job_on_hold(kind, obj, wl_key, version=version):
            return
        if self._elastic(kind, obj) and fact is not None:
            await self._sync_elastic(kind, obj, fact, version=version, now_ms=now_ms, context=context)
            return
        if fact is None:
            if self.publisher.sources.get(wl_key) == kind:  # it was managed and no longer is
                await self.publisher.delete_workload(wl_key, version=version)
            return
        known = wl_key in self.publisher.known["Workload"]
        if not known and isinstance(fact, types.WorkloadObserved) and objects.meta(obj).get("deletionTimestamp"):
            # a pod being deleted is never given a Workload (Kueue reconciler.go ReconcileGenericJob: loadJob's
            # shouldFinalize comes before ensureOneWorkload); the other kinds: :meth:`_finalize`
            self.recreated_at.pop(wl_key, None)
            log.info("deleting_job_gets_no_workload", job=f"{kind} {wl_key[0]}/{objects.name_of(obj)}")
            return
        if (
            isinstance(fact, types.WorkloadFinished)
            and (fact.workload.namespace, fact.workload.name) not in self.publisher.known["Workload"]
        ):
            # Kueue's reconciler finishes a Workload that exists and makes none for a finished job (reconciler.go
            # step 3): a finished job whose Workload is gone (the retention policies deleted it, or a hand) stays
            # without one, also across restarts
            self.recreated_at.pop(wl_key, None)
            return
        if isinstance(fact, types.WorkloadObserved) and known and self._running(kind, [obj]):
            previous = self.publisher.workloads.get(wl_key)
            if previous is not None and kind != "Pod" and (why := _not_matching(previous, fact.workload)):
                # Kueue's ensureOneWorkload: a running job its workload no longer matches is stopped
                # (StopReasonNoMatchingWorkload), that workload deleted, and a new one made for it once stopped
                await self.publisher.delete_workload(
                    wl_key,
                    version=f"not-matching@{version}",
                    uid=previous.metadata.uid,
                    reason=types.NO_MATCHING_WORKLOAD,
                )
                self.recreated_at[wl_key] = self.clock()
                if old_object := self.object_uids.get(wl_key):
                    self._seen_deleted(old_object)  # the dispatcher deletes it: not a deletion by hand of the new one
                log.info(
                    "workload_not_matching",
                    workload=f"{wl_key[0]}/{wl_key[1]}",
                    job=f"{kind} {objects.name_of(obj)}",
                    why=why,
                )
                return
            # pod sets are immutable while quota is reserved (SEMANTICS §1.6): ignore our own injections; the
            # priority is not (Kueue's UpdateWorkloadPriority: a changed priority-class label reaches the workload)
            await self._update_priority(wl_key, fact, version=version, source=kind)
            await self.reporter.job_progress(kind, obj, wl_key, version=version, now_ms=now_ms, context=context)
            await self.reporter.report_reclaimable(kind, obj, wl_key, version=version, context=context)
            return
        if isinstance(fact, types.WorkloadObserved) and known and kind != "Pod":
            known = not await self._delete_held_not_matching(kind, obj, wl_key, fact.workload, version=version)
        if isinstance(fact, types.WorkloadObserved) and not known and self._not_stopped(kind, obj):
            # a job with no workload (its Workload deleted while it ran) gets its new one once the dispatcher's
            # stop gave its templates back and its pods have ended (Kueue reconciler.go handleJobWithNoWorkload:
            # "Job is suspended but still has active pods, waiting")
            log.info("workload_creation_waits_for_stop", job=f"{kind} {wl_key[0]}/{objects.name_of(obj)}")
            return
        recreated_at = self.recreated_at.pop(wl_key, None)
        job = (kind, objects.namespace_of(obj), objects.name_of(obj))
        if isinstance(fact, types.ObjectRejected):
            if not known:
                self.refused.add(job)
        elif job in self.refused:
            self.refused.discard(job)
            if isinstance(fact, types.WorkloadObserved) and not known and recreated_at is None:
                recreated_at = now_ms  # Kueue's reconciler creates the Workload now, not with the job
        if isinstance(fact, types.WorkloadObserved) and recreated_at is not None:
            # a new Workload: created now, so it queues behind those created before it (Kueue's queue order)
            meta = msgspec.structs.replace(fact.workload.metadata, creation_timestamp_ms=recreated_at)
            fact = msgspec.structs.replace(fact, workload=msgspec.structs.replace(fact.workload, metadata=meta))
        else:
            fact = self.publisher.keep_created(wl_key, fact)
        log_rejection(fact)
        await self.publisher.publish(self.publisher.keep_active(wl_key, fact), version=version, source=kind)
        if not isinstance(fact, types.ObjectRejected):  # a later rejection of this job is news again
            self.publisher.last_published.pop((kind, objects.namespace_of(obj), objects.name_of(obj)), None)
        await self.reporter.job_progress(kind, obj, wl_key, version=version, now_ms=now_ms, context=context)
        if isinstance(fact, types.WorkloadObserved):  # not once finished (reconciler.go step 3 comes first)
            await self.reporter.report_reclaimable(kind, obj, wl_key, version=version, context=context)

    async def child_seen(self, kind: str, obj: objects.KubeObject) -> None:
        """Publish :class:`~kueue_es.events.types.ChildJobObserved` when ``obj``, a job of ``kind`` (not a Pod, nor
        a kind run through its pods), runs under a job Kueue manages: its controller chain reaches one
        (:func:`~kueue_es.jobframework.workloads.ancestry`, Kueue's FindAncestorJobManagedByKueue; a chain too deep
        or cyclic is Kueue's error: no suspension), it is neither suspended nor finished nor being deleted, in a
        namespace Kueue manages. The dispatcher then suspends it unless the ancestor's workload is admitted (Kueue's
        job reconciler, reconciler.go ReconcileGenericJob, shouldSuspendChildJob). Once per running spell: a child
        seen not running is reported again when it runs again; the fact's Msg-Id is its UID and resourceVersion.
        Called for every job seen, queue-labelled or not (:meth:`Watcher.unqueued_owner_event`)."""
        uid = objects.uid_of(obj)
        integration = integrations.by_kind(kind) if kind not in _CONVERTERS else None
        if kind == "Pod" or not uid or (integration is not None and integration.suspend_path is None):
            return
        raw = cast(Mapping[str, Any], obj)
        running = (
            not objects.meta(obj).get("deletionTimestamp")
            and self._running(kind, [obj])
            and (integration.finished(raw) if integration is not None else jobs.finished_condition(raw)) is None
        )
        if not running:
            self.children_running.pop(uid, None)
            return
        if uid in self.children_running:
            return
        context = self.inputs.managed_context()
        namespace = objects.namespace_of(obj)
        if not context.namespace_managed(namespace):
            return
        api_version = API_VERSIONS[kind]
        found = workloads.ancestry(workloads.job_ref(raw, kind=kind, api_version=api_version), context)
        if found.ancestor is None or found.too_deep or found.cyclic:
            return
        ancestor = found.ancestor
        if self._admitted_as_seen(ancestor):
            return  # the usual child, run by its admitted ancestor: no fact (the fold would leave it alone)
        fact = types.ChildJobObserved(
            api_version=api_version,
            kind=kind,
            namespace=namespace,
            name=objects.name_of(obj),
            uid=uid,
            ancestor=models.OwnerReference(
                api_version=ancestor.api_version, kind=ancestor.kind, name=ancestor.name, uid=ancestor.uid
            ),
            at_ms=self.clock(),
        )
        self.children_running[uid] = None
        log.info(
            "child_job_running", job=f"{kind} {namespace}/{fact.name}", ancestor=f"{ancestor.kind} {ancestor.name}"
        )
        await self.publisher.emit(fact, version=f"{uid}.{objects.resource_version(obj)}")

    def _admitted_as_seen(self, ancestor: workloads.Owner) -> bool:
        """Whether the Workload object named after job ``ancestor`` is Admitted (and not Finished) as last seen:
        then the children its controller makes as it runs are not reported one by one. Only a filter: seen
        admitted while the log has released it, the ancestor is being stopped, and its controller suspends them."""
        if ancestor.kind == "Job":
            name = jobs.workload_name_for_job(ancestor.name, ancestor.uid)
        elif (integration := integrations.by_kind(ancestor.kind)) is not None:
            name = integration.workload_name(ancestor.name, ancestor.uid)
        else:
            return False
        held = self.held.get((ancestor.namespace, name))
        return held is not None and held.admitted

    async def _delete_held_not_matching(
        self, kind: str, obj: objects.KubeObject, wl_key: Key, now: models.Workload, *, version: str
    ) -> bool:
        """Whether the suspended job's workload was deleted as no longer matching it: its Workload object holds
        quota (:attr:`held`) and the job as converted now (``now``) is not what it reserved for
        (:func:`_not_equivalent`). Kueue's ensureOneWorkload rewrites a suspended job's Workload in place only
        when it holds no quota (updateWorkloadToMatchJob, "Updated not matching Workload for suspended job");
        one holding quota, waiting for its admission checks or admitted before the job was started, is deleted
        ("Deleted not matching Workload", its quota released) and the job gets a new one, queued anew
        (reconciler.go ensureOneWorkload, handleJobWithNoWorkload). The deletion's ``ObjectDeleted`` has
        ``reason`` ``NoMatchingWorkload``; the caller publishes the new workload, created now."""
        held = self.held.get(wl_key)
        previous = self.publisher.workloads.get(wl_key)
        if held is None or previous is None or held.uid in self.deleted_objects:
            return False
        why = _not_equivalent(held, previous, now)
        if not why:
            return False
        await self.publisher.delete_workload(
            wl_key, version=f"not-matching@{version}", uid=previous.metadata.uid, reason=types.NO_MATCHING_WORKLOAD
        )
        self.recreated_at[wl_key] = self.clock()
        self.held.pop(wl_key, None)
        self._seen_deleted(held.uid)  # the dispatcher deletes it: not a deletion by hand of the new one
        log.info(
            "workload_not_matching",
            workload=f"{wl_key[0]}/{wl_key[1]}",
            job=f"{kind} {objects.name_of(obj)}",
            why=why,
            holds_quota=True,
        )
        return True

    async def _update_priority(self, wl_key: Key, fact: types.WorkloadObserved, *, version: str, source: str) -> None:
        """The running job's workload as last published, with the priority class and value of ``fact`` (the job
        converted now) when they differ (jobframework/reconciler.go UpdateWorkloadPriority)."""
        previous = self.publisher.workloads.get(wl_key)
        if previous is None:
            return
        spec, now = previous.spec, fact.workload.spec
        if (spec.priority_class_ref, spec.priority) == (now.priority_class_ref, now.priority):
            return
        changed = msgspec.structs.replace(
            previous,
            spec=msgspec.structs.replace(spec, priority_class_ref=now.priority_class_ref, priority=now.priority),
        )
        await self.publisher.publish(types.WorkloadObserved(workload=changed), version=version, source=source)

    # -- elastic jobs (SEMANTICS-ADVANCED D.2) ----------------------------------------------------

    def _elastic(self, kind: str, obj: objects.KubeObject) -> bool:
        """Whether the job is an elastic job of a kind Kueue lets be one (batch/v1 Job and the Ray kinds:
        validation.go supportedElasticJobGVKs) with ElasticJobsViaWorkloadSlices on."""
        return kind in ELASTIC_KINDS and job_slices.is_elastic_job(obj, enabled=self.inputs.elastic_jobs)

    def _child_cluster(self, kind: str, obj: objects.KubeObject) -> objects.KubeObject | None:
        """The RayCluster KubeRay made for an elastic RayJob (``status.rayClusterName``) or RayService
        (``status.activeServiceStatus.rayClusterName``), as last seen; None for other kinds or before."""
        status = cast(Mapping[str, Any], obj).get("status") or {}
        if kind == "RayJob":
            name = status.get("rayClusterName")
        elif kind == "RayService":
            name = (status.get("activeServiceStatus") or {}).get("rayClusterName")
        else:
            return None
        if not isinstance(name, str) or not name:
            return None
        return self.objects["RayCluster"].get((objects.namespace_of(obj), name))

    def _with_cluster_counts(self, kind: str, obj: objects.KubeObject, fact: types.Fact) -> types.Fact:
        """An elastic RayJob's or RayService's workload with the worker counts of its RayCluster, which
        the Ray autoscaler changes, when it autoscales (raycluster/common.go UpdatePodSets)."""
        if kind not in ("RayJob", "RayService") or not isinstance(fact, types.WorkloadObserved):
            return fact
        spec = cast(Mapping[str, Any], obj).get("spec") or {}
        cluster_spec = spec.get("rayClusterSpec") if kind == "RayJob" else spec.get("rayClusterConfig")
        if not isinstance(cluster_spec, dict) or cluster_spec.get("enableInTreeAutoscaling") is not True:
            return fact
        counts = ray.child_cluster_counts(self._child_cluster(kind, obj))
        if not counts:
            return fact
        pod_sets = [
            msgspec.structs.replace(ps, count=counts[ps.name]) if ps.name in counts else ps
            for ps in fact.workload.spec.pod_sets
        ]
        workload = msgspec.structs.replace(
            fact.workload, spec=msgspec.structs.replace(fact.workload.spec, pod_sets=pod_sets)
        )
        return msgspec.structs.replace(fact, workload=workload)

    def _name_extra(self, kind: str, obj: objects.KubeObject, generation: int) -> str:
        """What besides the job names its slices: a RayJob's or RayService's ``<generation>_<its
        RayCluster's generation>`` once the RayCluster exists (raycluster/common.go
        GetWorkloadNameExtraPart), else "" (the generation alone)."""
        cluster = self._child_cluster(kind, obj)
        if cluster is None:
            return ""
        cluster_generation = (cast(Mapping[str, Any], cluster).get("metadata") or {}).get("generation")
        return f"{generation}_{cluster_generation}" if cluster_generation else ""

    async def owner_of_cluster_changed(self, obj: objects.KubeObject, *, version: str) -> None:
        """A RayCluster changed: convert again the elastic RayJob or RayService controlling it, whose
        worker counts it holds (the Ray autoscaler scales the RayCluster)."""
        owner = workloads.controller_owner(cast(Mapping[str, Any], obj).get("metadata") or {})
        if owner is None or owner.get("kind") not in ("RayJob", "RayService"):
            return
        kind = str(owner["kind"])
        parent = self.objects[kind].get((objects.namespace_of(obj), str(owner.get("name") or "")))
        if parent is not None and self._elastic(kind, parent):
            await self._sync_job(kind, parent, version=f"{objects.resource_version(parent)}~{version}")

    def workload_status(self, obj: objects.KubeObject) -> None:
        """A job's Workload object changed: remember whether it holds quota and whether it finished
        (an elastic slice replaced by a newer one finishes ``WorkloadSliceReplaced``)."""
        key = f"{objects.namespace_of(obj)}/{objects.name_of(obj)}"
        if uid := objects.uid_of(obj):
            self.object_uids[(objects.namespace_of(obj), objects.name_of(obj))] = uid
        conditions = (cast(Mapping[str, Any], obj).get("status") or {}).get("conditions") or []
        states = {c.get("type"): c.get("status") == "True" for c in conditions if isinstance(c, dict)}
        self.slice_reserved[key] = bool(states.get("QuotaReserved"))
        self.slice_finished[key] = bool(states.get("Finished"))
        wl_key = (objects.namespace_of(obj), objects.name_of(obj))
        if states.get("QuotaReserved") and not states.get("Finished"):
            self.held[wl_key] = HeldWorkload.of(obj, admitted=bool(states.get("Admitted")))
        else:
            self.held.pop(wl_key, None)

    async def workload_object_changed(self, obj: objects.KubeObject) -> None:
        """A job's Workload object changed (not being deleted, not orphaned): :meth:`workload_status`, then, when
        it holds quota for another shape than the watcher last published for it (the log kept the reserved pod
        sets of a change published while the admitter reserved quota: :mod:`kueue_es.projections.cluster`),
        its suspended job is looked at again, which deletes it as not matching (:meth:`_sync_job`)."""
        self.workload_status(obj)
        key = (objects.namespace_of(obj), objects.name_of(obj))
        await self._boost_changed(obj, key)
        await self._own_priority_changed(obj, key)
        held, published = self.held.get(key), self.publisher.workloads.get(key)
        if held is None or published is None or published.owner is None or held.counts == _counts(published):
            return
        kind = published.owner.kind
        job = self.objects[kind].get((key[0], published.owner.name)) if kind in self.objects else None
        if job is None or objects.uid_of(job) != published.owner.uid or kind == "Pod" or self._running(kind, [job]):
            return
        await self._sync_job(kind, job, version=f"{objects.resource_version(job)}~held@{held.uid}")

    async def _boost_changed(self, obj: objects.KubeObject, key: Key) -> None:
        """A job's Workload object carries another ``kueue.x-k8s.io/priority-boost`` than last seen (set by
        another controller, Kueue's priority booster among them: KEP 7990): its workload is published again with
        it (:meth:`Publisher.boosted`), as Kueue's scheduler reads the object's annotation."""
        annotations = (cast(Mapping[str, Any], obj).get("metadata") or {}).get("annotations") or {}
        value = annotations.get(models.PRIORITY_BOOST_ANNOTATION)
        boost = str(value) if value is not None else None
        if key in self.publisher.boosts and self.publisher.boosts[key] == boost:
            return
        self.publisher.boosts[key] = boost
        published = self.publisher.workloads.get(key)
        if published is None or published.owner is None:
            return
        if published.metadata.annotations.get(models.PRIORITY_BOOST_ANNOTATION) == boost:
            return  # as published (the first sight of an object without one)
        await self.publisher.publish(
            types.WorkloadObserved(workload=published),
            version=f"{objects.resource_version(obj)}~boost",
            source=self.publisher.sources.get(key, ""),
        )

    async def _own_priority_changed(self, obj: objects.KubeObject, key: Key) -> None:
        """A job's Workload object whose ``spec.priority`` a user set (:func:`own_priority_of`) other than last
        seen, or no longer: its workload is published again with it (:meth:`Publisher.own_priority`), as Kueue's
        scheduler reads ``spec.priority`` off the object and its job reconciler leaves it while the job's priority
        class stays. A value the dispatcher wrote is the log's already, or older than the log's (its apply
        answering a change not yet folded): never read back, so a stale write of its own undoes nothing."""
        if not self.publisher.object_priority(key, own_priority_of(obj)):
            return
        published = self.publisher.workloads.get(key)
        if published is None or published.owner is None:
            return
        await self.publisher.publish(
            types.WorkloadObserved(workload=published),
            version=f"{objects.resource_version(obj)}~priority",
            source=self.publisher.sources.get(key, ""),
        )

    def _slices(self, obj: objects.KubeObject) -> list[models.Workload]:
        """The unfinished slices of an elastic Job the log holds, oldest first."""
        namespace = objects.namespace_of(obj)
        return job_slices.chain(
            (wl for (ns, _), wl in self.publisher.workloads.items() if ns == namespace),
            job_uid=objects.uid_of(obj),
            finished=self.slice_finished,
        )

    async def _sync_elastic(
        self,
        kind: str,
        obj: objects.KubeObject,
        fact: types.Fact,
        *,
        version: str,
        now_ms: int,
        context: workloads.Context,
    ) -> None:
        """Publish what an elastic job's slices are now: the first slice, a slice updated in place, or
        a replacement slice (:func:`kueue_es.jobframework.slices.plan`); a finished job finishes every
        unfinished slice."""
        fact = self._with_cluster_counts(kind, obj, fact)
        chain = self._slices(obj)
        for extra, reason, message in job_slices.extras(chain, reserved=self.slice_reserved):
            ref = types.WorkloadRef(
                namespace=extra.metadata.namespace, name=extra.metadata.name, uid=extra.metadata.uid
            )
            finished = types.WorkloadFinished(
                workload=ref, succeeded=reason == slices.REPLACED_REASON, reason=reason, message=message, at_ms=now_ms
            )
            await self.publisher.publish(finished, version=f"{version}~{reason}", source=kind)
            self.slice_finished[extra.key] = True  # the Workload object says so once the dispatcher wrote it
            chain = [wl for wl in chain if wl is not extra]
        if isinstance(fact, types.WorkloadFinished):
            for wl in chain:
                ref = types.WorkloadRef(namespace=wl.metadata.namespace, name=wl.metadata.name, uid=wl.metadata.uid)
                await self.publisher.publish(msgspec.structs.replace(fact, workload=ref), version=version, source=kind)
            return
        if not isinstance(fact, types.WorkloadObserved):
            log_rejection(fact)
            await self.publisher.publish(fact, version=version, source=kind)
            return
        generation = workloads.parse_int((cast(Mapping[str, Any], obj).get("metadata") or {}).get("generation")) or 1
        running = self._running(kind, [obj])
        planned = job_slices.plan(
            fact.workload,
            slices_now=chain,
            reserved=self.slice_reserved,
            running=running,
            generation=generation,
            now_ms=now_ms,
            kind=kind,
            group=API_VERSIONS[kind].rpartition("/")[0],
            name_extra=self._name_extra(kind, obj, generation),
        )
        for workload in planned:
            key = (workload.metadata.namespace, workload.metadata.name)
            await self.publisher.publish(
                self.publisher.keep_active(key, types.WorkloadObserved(workload=workload)),
                version=version,
                source=kind,
            )
        head = self._slices(obj)
        if head:
            wl_key = (head[-1].metadata.namespace, head[-1].metadata.name)
            await self.reporter.job_progress(kind, obj, wl_key, version=version, now_ms=now_ms, context=context)

    def _log_uid(self, wl_key: Key, job_uid: str) -> str:
        """The UID on the log of workload ``wl_key`` of the job of UID ``job_uid``: the job's, but for an elastic
        job's replacement slice, which has its own (:func:`kueue_es.events.slices.replacement_uid`)."""
        known = self.publisher.workloads.get(wl_key)
        if known is not None and known.owner is not None and known.owner.uid == job_uid and known.metadata.uid:
            return known.metadata.uid
        return job_uid

    def _workload_keys(self, kind: str, obj: objects.KubeObject) -> list[Key]:
        """Every workload of a job: its slices for an elastic Job, else its one workload."""
        if self._elastic(kind, obj) and not prebuilt_tracking.names(kind, obj):
            uid = objects.uid_of(obj)
            return sorted(
                key
                for key, wl in self.publisher.workloads.items()
                if key[0] == objects.namespace_of(obj) and wl.owner is not None and wl.owner.uid == uid
            )
        key = self._workload_key(kind, obj)
        return [key] if key is not None else []

    def _not_stopped(self, kind: str, obj: objects.KubeObject) -> bool:
        """A Job or an integration's job that still has active pods (Kueue's ``job.IsActive()``: a batch/v1
        Job's ``status.active``), or runs with a start of the dispatcher's in its templates (each started
        template carries the ``kueue.x-k8s.io/podset`` label until the stop takes it out). False for Pods."""
        if kind == "Pod":
            return False
        integration = integrations.by_kind(kind) if kind not in _CONVERTERS else None
        raw = cast(Mapping[str, Any], obj)
        if integration.active(raw) if integration is not None else (raw.get("status") or {}).get("active"):
            return True
        if not self._running(kind, [obj]):
            return False
        try:
            templates = integrations.job_pod_templates(API_VERSIONS[kind], kind, cast(Mapping[str, Any], obj))
        except (manifests.ManifestError, KeyError, TypeError):
            return False
        return any(
            PODSET_LABEL in (((template.get("metadata") or {}).get("labels")) or {}) for template in templates.values()
        )

    # -- orphaned Workloads (kubectl delete job --cascade=orphan) ----------------------------------

    async def workload_object_orphaned(self, obj: objects.KubeObject) -> None:
        """A job's Workload object seen without owner references but with its job's ``kueue.x-k8s.io/job-uid``
        label (:func:`kueue_es.jobframework.workloads.is_orphaned`: the garbage collector took the job's
        reference off before an orphaning deletion of the job): the log's workload is finished ``OwnerNotFound``
        (its quota released, the object kept; Kueue's workload_controller.go isOrphanedWorkload and
        workload.go FinalizeOrphanedWorkload), once, and is no longer deleted with its job. Nothing for an
        object the log holds no job's workload for, or one of an earlier job of that name (another job UID)."""
        self.workload_status(obj)
        key = (objects.namespace_of(obj), objects.name_of(obj))
        known = self.publisher.workloads.get(key)
        if known is None or known.owner is None or key not in self.publisher.known["Workload"]:
            return
        labels = objects.meta(obj).get("labels") or {}
        if labels.get(workloads.JOB_UID_LABEL) != known.owner.uid:
            return
        await self._orphan(key, known, finished=_finished_object(obj))

    async def _left_orphaned(
        self, kind: str, obj: objects.KubeObject | None, wl_key: Key, *, orphaning: bool, listed: bool = False
    ) -> bool:
        """Whether the workload ``wl_key`` of job ``obj`` (as last seen; None when this watcher never saw it), just
        deleted, outlives it: its Workload object was seen orphaned, or the job was seen being deleted with the
        ``orphan`` finalizer (``orphaning``: propagationPolicy Orphan, the garbage collector takes the job's
        reference off the Workload before the job goes, whichever watch tells first), or -- the job found gone
        by a list (``listed``), its deletion and its Workload's change maybe both unseen -- the Workload object as
        the API server holds it now is orphaned (:meth:`_orphaned_object`): the garbage collector took the job's
        reference off before the job could go, so what it says then is the outcome, whatever order the watches
        tell in, as Kueue's workload controller decides from the Workload alone (workload_controller.go
        isOrphanedWorkload). Such a workload is finished ``OwnerNotFound`` (unless its job or its Workload had
        finished) instead of deleted."""
        if wl_key in self.publisher.orphaned:
            return True
        known = self.publisher.workloads.get(wl_key)
        if known is None or known.owner is None or (obj is not None and known.owner.uid != objects.uid_of(obj)):
            return False
        left = None
        if not orphaning:
            left = await self._orphaned_object(wl_key, job_uid=known.owner.uid) if listed else None
            if left is None:
                return False
        finished = left is not None and _finished_object(left)
        if obj is not None and not finished:
            context = self.inputs.context(wl_key, previous=known)
            try:
                converted = _convert(kind, obj, now_ms=self.clock(), context=context)
            except manifests.ManifestError:
                converted = None
            finished = isinstance(converted, types.WorkloadFinished)
        await self._orphan(wl_key, known, finished=finished)
        return True

    async def _orphaned_object(self, wl_key: Key, *, job_uid: str) -> objects.KubeObject | None:
        """The Workload object ``wl_key`` as the API server holds it now, when it is its job's (the
        ``kueue.x-k8s.io/job-uid`` label ``job_uid``) left without owner references
        (:func:`kueue_es.jobframework.workloads.is_orphaned`); None otherwise (gone, still owned: the garbage
        collector deletes it, or no reader)."""
        if self.read_workload is None:
            return None
        current = await self.read_workload(*wl_key)
        if current is None or not workloads.is_orphaned(cast(Mapping[str, Any], current)):
            return None
        labels = objects.meta(current).get("labels") or {}
        return current if labels.get(workloads.JOB_UID_LABEL) == job_uid else None

    async def _orphan(self, key: Key, known: models.Workload, *, finished: bool) -> None:
        """Workload ``key`` (``known``: as the log holds it) outlives its job: remembered as orphaned and, unless
        ``finished`` already, finished OwnerNotFound (Msg-Id ``orphaned.<uid>``: stored once)."""
        if key in self.publisher.orphaned:
            return
        uid = known.metadata.uid
        self.publisher.orphaned[key] = uid
        log.info("workload_orphaned", workload=f"{key[0]}/{key[1]}", job_uid=known.owner.uid if known.owner else "")
        if finished or not self.inputs.finish_orphans:
            # FinishOrphanedWorkloads off: Kueue leaves it as it is, holding its quota (isOrphanedWorkload)
            return
        ref = types.WorkloadRef(namespace=key[0], name=key[1], uid=uid)
        await self.publisher.emit(workloads.owner_not_found(ref, at_ms=self.clock()), version=f"orphaned.{uid}")

    async def _finalize(self, kind: str, obj: objects.KubeObject, *, version: str) -> None:
        """A job being deleted (``deletionTimestamp``: held by a finalizer, ``kubectl delete --cascade=foreground``,
        or seen so after a restart) is only finalized, never converted, stopped nor given a Workload, as Kueue's
        job reconciler does (reconciler.go ReconcileGenericJob: loadJob's shouldFinalize comes first; finalize,
        finalizeWorkloads). Each workload the log holds for it with it as owner is finished ``OwnerNotFound``, its
        quota released (workload.go FinalizeOrphanedWorkload; its Workload object has its controller reference):
        with the ``orphan`` finalizer as an orphaned one (:meth:`_orphan`: the garbage collector takes the
        reference off and the object outlives the job), else with ``owner_deleting`` (Msg-Id
        ``finalized.<uid>``): the object keeps its owner reference and goes with the job, whose deletion deletes
        the workload from the log. Nothing for a workload whose Workload object says Finished already (Kueue's
        Finish is then a no-op), nor, with the gate FinishOrphanedWorkloads off, for any: Kueue then only takes
        its finalizer off, and the workload holds its quota until its job is gone. ``version``: the job's."""
        orphaning = _orphaning(obj)
        for wl_key in self._workload_keys(kind, obj):
            self.recreated_at.pop(wl_key, None)
            known = self.publisher.workloads.get(wl_key)
            if (
                known is None
                or known.owner is None
                or known.owner.uid != objects.uid_of(obj)
                or wl_key not in self.publisher.known["Workload"]
            ):
                # it never had one, or it went first (deleted by the garbage collector: --cascade=foreground)
                log.info("deleting_job_gets_no_workload", job=f"{kind} {wl_key[0]}/{objects.name_of(obj)}")
                continue
            finished = self.slice_finished.get(f"{wl_key[0]}/{wl_key[1]}", False)
            if orphaning:
                await self._orphan(wl_key, known, finished=finished)
                continue
            uid = known.metadata.uid
            if finished or not self.inputs.finish_orphans or uid in self.finalized:
                continue
            self.finalized[uid] = None
            while len(self.finalized) > DELETED_OBJECTS_KEPT:
                del self.finalized[next(iter(self.finalized))]
            ref = types.WorkloadRef(namespace=wl_key[0], name=wl_key[1], uid=uid)
            fact = workloads.owner_not_found(ref, at_ms=self.clock(), owner_deleting=True)
            await self.publisher.emit(fact, version=f"finalized.{uid}")
            log.info("deleting_jobs_workload_finished", workload=f"{wl_key[0]}/{wl_key[1]}", job_version=version)

    async def workloads_listed(self, listed: list[objects.KubeObject], *, version: str) -> None:
        """A fresh list of the Workload objects: an orphaned workload (:attr:`Publisher.orphaned`) whose object
        is gone was deleted while no watch told (its job is gone already: nothing else deletes it)."""
        live = {(objects.namespace_of(obj), objects.name_of(obj)) for obj in listed}
        for key in sorted(set(self.publisher.orphaned) - live):
            await self.publisher.delete_workload(key, version=version)

    async def workload_object_deleted(self, obj: objects.KubeObject) -> None:
        """A job's Workload object was marked for deletion (``kubectl delete workload``: Kueue's finalizer holds
        it until its job is stopped) or deleted, while its job remains, seen once per object UID: the log's
        workload is deleted (its quota released, its job stopped by the dispatcher) and the job gets a new one,
        once stopped (Kueue reconciler.go: a Workload marked for deletion stops its job; a job with no Workload
        gets a new one). Nothing when its job is gone too (that deletion is the job's) -- but an orphaned
        workload's (:meth:`workload_object_orphaned`), which outlived its job, is deleted now --, for an object
        that is not the workload the log holds for the job and for an elastic job's slices. A job being deleted
        (``deletionTimestamp``: ``kubectl delete --cascade=foreground``, whose garbage collector deletes the
        Workload before the job): the workload is deleted with no stop and no new one. A single Pod's or a
        pod group's: :meth:`_pods_workload_deleted` (its pods are deleted, not given a new one)."""
        key = (objects.namespace_of(obj), objects.name_of(obj))
        object_uid = objects.uid_of(obj)
        if object_uid and self.object_uids.get(key) == object_uid:
            del self.object_uids[key]  # going or gone: only the live objects are remembered
        if object_uid in self.deleted_objects:
            return  # its deletion was seen when it was marked for deletion (its DELETED follows)
        known = self.publisher.workloads.get(key)
        if known is None or known.owner is None or key not in self.publisher.known["Workload"]:
            return
        deleting_ms = _deletion_ms(obj)
        if deleting_ms and known.metadata.creation_timestamp_ms > deleting_ms:
            # the log's workload was made after this object's deletion (its new one, made at the deletion's
            # time): that deletion was seen before a restart, and this is the old object going
            return
        owner = known.owner
        labels = objects.meta(obj).get("labels") or {}
        if key in self.publisher.orphaned and labels.get(workloads.JOB_UID_LABEL) == owner.uid:
            # an orphaned workload's object deleted (by hand, or the retention policies): it goes from the log
            if object_uid:
                self._seen_deleted(object_uid)
            await self.publisher.delete_workload(
                key, version=_gone_version(obj), uid=known.metadata.uid, at_ms=self.clock()
            )
            log.info("orphaned_workload_object_deleted", workload=f"{key[0]}/{key[1]}")
            return
        if owner.kind == "Pod":
            await self._pods_workload_deleted(key, known, obj)
            return
        if labels.get(workloads.JOB_UID_LABEL, owner.uid) != owner.uid:
            return  # an object of an earlier job of that name
        kind = owner.kind if owner.kind in self.objects else ""
        job = self.objects[kind].get((key[0], owner.name)) if kind else None
        if job is None or objects.uid_of(job) != owner.uid or self._elastic(kind, job):
            return
        if not objects.meta(job).get("deletionTimestamp") and self.read_job is not None:
            # the Job and Workload watches tell in no set order: kubectl delete --cascade=foreground marks the job
            # before the garbage collector deletes its Workload, and the job's MODIFIED (or DELETED) may come second
            try:
                current = await self.read_job(kind, key[0], owner.name)
            except (kube_errors.ApiError, kube_errors.ConnectionFailedError) as err:
                log.warning("job_read_failed", job=f"{kind} {key[0]}/{owner.name}", error=str(err))
            else:
                if current is None or objects.uid_of(current) != owner.uid:
                    return  # the job is gone: its deletion, on its way, takes the workload
                job = current
        version = objects.resource_version(obj)
        if object_uid:
            self._seen_deleted(object_uid)
        if objects.meta(job).get("deletionTimestamp"):
            # its job is being deleted and the garbage collector deletes the Workload first (kubectl delete
            # --cascade=foreground: the job waits for it): the workload goes with its job, which is neither
            # stopped nor given a new one (Kueue reconciler.go: a job being deleted is only finalized)
            await self.publisher.delete_workload(
                key, version=_gone_version(obj), uid=known.metadata.uid, at_ms=self.clock()
            )
            log.info("deleting_jobs_workload_object_deleted", workload=f"{key[0]}/{key[1]}", job=f"{kind} {owner.name}")
            return
        context = self.inputs.context(key, previous=known)
        if isinstance(_convert(kind, job, now_ms=self.clock(), context=context), types.WorkloadFinished):
            # a finished job's Workload (the retention policies' afterFinished, or a hand): gone, and no new one made
            # (reconciler.go step 3); the dispatcher records its own deletion with this Msg-Id, so it is stored once
            await self.publisher.delete_workload(
                key, version=_gone_version(obj), uid=known.metadata.uid, at_ms=self.clock()
            )
            log.info("finished_workload_object_deleted", workload=f"{key[0]}/{key[1]}", job=f"{kind} {owner.name}")
            return
        # the Msg-Id names the object's deletion: a Workload the dispatcher deleted (the retention policies, when
        # the job's state does not tell it finished) is stored once too
        await self.publisher.delete_workload(key, version=_gone_version(obj), uid=known.metadata.uid)
        self.recreated_at[key] = self.clock()
        log.info("workload_object_deleted", workload=f"{key[0]}/{key[1]}", job=f"{kind} {key[0]}/{owner.name}")
        await self._sync_job(kind, job, version=f"{objects.resource_version(job)}~{version}")

    async def _pods_workload_deleted(self, key: Key, known: models.Workload, obj: objects.KubeObject) -> None:
        """The Workload object of a single Pod or a pod group was marked for deletion or deleted while its pods
        remain: the log's workload is deleted (its quota released) and, as Kueue's reconciler stops a job whose
        Workload is being deleted (Pod.Stop deletes its pods), the dispatcher deletes the pods; none of them is
        given a workload again meanwhile (:attr:`doomed`). A finished workload's pods stay (Kueue finalizes the
        job of a finished Workload first); its ObjectDeleted carries the time it was seen gone, as the
        dispatcher's when the retention policies deleted it (the same Msg-Id: :func:`_gone_version`)."""
        namespace = key[0]
        owner = known.owner
        assert owner is not None
        pods_of = self.objects["Pod"]
        grouped = known.metadata.annotations.get(IS_GROUP_WORKLOAD_ANNOTATION) == "true"
        if grouped:
            members = [
                pods_of[(namespace, n)] for n in sorted(self.groups.groups.get(key, ())) if (namespace, n) in pods_of
            ]
        else:
            pod = pods_of.get((namespace, owner.name))
            members = [pod] if pod is not None and objects.uid_of(pod) == owner.uid else []
        owners = {
            str(ref.get("uid"))
            for ref in objects.meta(obj).get("ownerReferences") or []
            if isinstance(ref, dict) and ref.get("kind") == "Pod"
        }
        if not any(objects.uid_of(pod) in owners for pod in members):
            # no pod it names is left: the garbage collector's deletion once its owners went (a replacement
            # pod is not among them), or the pods' own going, not a deletion by hand (the collector never
            # deletes an object while one of its owners remains)
            return
        if object_uid := objects.uid_of(obj):
            self._seen_deleted(object_uid)
        self.doomed[key] = {objects.uid_of(pod) for pod in members}
        finished = _finished_object(obj) or (
            pods.group_has_finished(self.groups.members(key)) if grouped else pods.is_terminated(members[0])
        )
        # a finished one's pods stay (the dispatcher deletes no pod of a finished workload) and its deletion is most
        # likely the retention policies' (afterFinished), which the dispatcher records itself, with its time: the
        # Msg-Id names the object's deletion (gone@<object UID>), the same as the dispatcher's, so it is stored once
        await self.publisher.delete_workload(
            key,
            version=_gone_version(obj),
            uid=known.metadata.uid,
            at_ms=self.clock() if finished else msgspec.UNSET,
        )
        log.info("workload_object_deleted", workload=f"{namespace}/{key[1]}", pods=len(members), finished=finished)

    def _seen_deleted(self, object_uid: str) -> None:
        """Workload object ``object_uid``'s deletion is published (or needs none): its later events are not news."""
        self.deleted_objects[object_uid] = None
        while len(self.deleted_objects) > DELETED_OBJECTS_KEPT:
            del self.deleted_objects[next(iter(self.deleted_objects))]

    def _forget_doomed(self, pod_uid: str) -> None:
        for key in [k for k, uids in self.doomed.items() if pod_uid in uids]:
            uids = self.doomed[key]
            uids.discard(pod_uid)
            if not uids:
                del self.doomed[key]

    def _running(self, kind: str, objs: list[objects.KubeObject]) -> bool:
        """A started job: its workload's template now carries the flavor's node selector and
        tolerations, which the dispatcher put there, and must not be reported as the workload's
        (also after a restart: ``known`` comes from the log, ``Watcher.learn_from_log``)."""
        if kind == "Pod":
            return pods.is_running(objs)
        integration = integrations.by_kind(kind) if kind not in _CONVERTERS else None
        if integration is not None:
            return not any(integrations.suspended(integration, obj) for obj in objs)
        return not any((cast(Mapping[str, Any], obj).get("spec") or {}).get("suspend", False) for obj in objs)

    def _managed(self, kind: str, obj: objects.KubeObject) -> bool:
        """Whether a job is one Kueue manages (an invalid one counts: its last valid workload stays)."""
        context = self.inputs.managed_context()
        if not context.namespace_managed(objects.namespace_of(obj)):
            # ignored by Kueue's reconciler, not deleted: a workload it had stays (managedJobsNamespaceSelector)
            return self._workload_key(kind, obj) in self.publisher.known["Workload"]
        if kind == "Pod":
            return pods.is_managed(obj, context)
        ref = workloads.job_ref(obj, kind=kind, api_version=API_VERSIONS[kind])
        try:
            return not workloads.managed_ancestor(ref, context) and workloads.queue_name(ref, context) is not None
        except manifests.ManifestError:
            return True

    def _workload_key(self, kind: str, obj: objects.KubeObject) -> Key | None:
        name, uid = objects.name_of(obj), objects.uid_of(obj)
        if kind == "Pod":
            return pods.workload_key(obj)
        if named := prebuilt_tracking.names(kind, obj):
            return objects.namespace_of(obj), named
        if kind == "Job":
            return objects.namespace_of(obj), jobs.workload_name_for_job(name, uid)
        integration = integrations.by_kind(kind)
        if integration is not None:
            return objects.namespace_of(obj), integration.workload_name(name, uid)
        return None


def _not_matching(workload: models.Workload, now: models.Workload) -> str:
    """Why a running job's workload no longer matches the job as converted now, or "" (Kueue's
    EquivalentToWorkload, reconciler.go, against expectedRunningPodSets; equality.ComparePodSets): its pod sets'
    names, or a pod set's count other than the one it runs with. That is the workload's count (a count lowered
    is a mismatch as much as one raised: a batch/v1 Job's count is min(parallelism, completions), whatever its
    pods did), but for a pod set with a minCount of a workload that can be partially admitted
    (workload.go CanBePartiallyAdmitted), whose start set it to the admitted count: Kueue compares it with that
    count; here any count from its minCount to the workload's passes, as the Workload object naming the
    admitted count may be seen after the job's start, and Kueue's job webhook forbids any other change of a
    running partial Job's parallelism (job_webhook.go validatePartialAdmissionUpdate). Requests are not
    compared: the effective ones the log keeps move with LimitRanges and RuntimeClasses, which Kueue's template
    comparison does not see; node selectors, tolerations and labels are not either: a start injects them."""
    before = {ps.name: ps for ps in workload.spec.pod_sets}
    after = {ps.name: ps for ps in now.spec.pod_sets}
    if list(before) != list(after):
        return f"pod sets {sorted(before)} are now {sorted(after)}"
    partial = _can_be_partially_admitted(_counts(workload))
    for name, ps in after.items():
        was = before[name]
        if partial and was.min_count is not None and ps.min_count == was.min_count:
            if not was.min_count <= ps.count <= was.count:
                return f"pod set {name}: {ps.count} pods, the workload admits {was.min_count} to {was.count}"
            continue
        if ps.count != was.count:
            return f"pod set {name}: {ps.count} pods, the workload has {was.count}"
        if ps.min_count != was.min_count:
            return f"pod set {name}: minCount {ps.min_count}, the workload has {was.min_count}"
    return ""


def _can_be_partially_admitted(counts: tuple[tuple[str, int, int | None], ...]) -> bool:
    """Whether a pod set of ``counts`` (name, count, minCount) may run with fewer pods than its count (Kueue
    workload.go CanBePartiallyAdmitted)."""
    return any(min_count is not None and count > min_count for _, count, min_count in counts)


class HeldWorkload(msgspec.Struct, frozen=True, kw_only=True):
    """What a job's Workload object holding quota says: its UID, whether it is Admitted too, the pod sets it
    reserved for (``spec.podSets``: name, count, minCount), in order, and those its job is expected to run
    (``running``: Kueue's expectedRunningPodSets, reconciler.go), or None when its ``status.admission`` does not
    assign every pod set."""

    uid: str
    admitted: bool
    counts: tuple[tuple[str, int, int | None], ...]
    running: tuple[tuple[str, int, int | None], ...] | None = None

    @classmethod
    def of(cls, obj: objects.KubeObject, *, admitted: bool) -> HeldWorkload:
        """Read from a Workload object; a pod set's missing count is Kueue's default, 1. Its running pod sets are
        its pod sets with, when it can be partially admitted, each one with a minCount at the count its
        ``status.admission.podSetAssignments`` entry assigns (a missing one: the pod set's count;
        reconciler.go expectedRunningPodSets, podset.FromAssignment)."""
        raw = cast(Mapping[str, Any], obj)
        spec = raw.get("spec") or {}
        counts = tuple(
            (
                str(ps.get("name") or ""),
                _int(ps.get("count"), default=1),
                _int(ps.get("minCount"), default=None),
            )
            for ps in spec.get("podSets") or []
            if isinstance(ps, dict)
        )
        admission = (raw.get("status") or {}).get("admission")
        entries = (admission.get("podSetAssignments") if isinstance(admission, dict) else None) or []
        assigned = {
            str(a.get("name") or ""): _int(a.get("count"), default=None) for a in entries if isinstance(a, dict)
        }
        running = None
        if counts and all(name in assigned for name, _, _ in counts):
            partial = _can_be_partially_admitted(counts)
            running = tuple(
                (
                    name,
                    _assigned_count(assigned[name], count) if partial and min_count is not None else count,
                    min_count,
                )
                for name, count, min_count in counts
            )
        return cls(uid=objects.uid_of(obj), admitted=admitted, counts=counts, running=running)


def _assigned_count(assigned: int | None, count: int) -> int:
    """A podSetAssignments entry's count, the pod set's when it has none (podset.FromAssignment)."""
    return count if assigned is None else assigned


def _int(value: Any, *, default: Any) -> Any:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _counts(workload: models.Workload) -> tuple[tuple[str, int, int | None], ...]:
    """A workload's pod sets as :attr:`HeldWorkload.counts` has them."""
    return tuple((ps.name, ps.count, ps.min_count) for ps in workload.spec.pod_sets)


def _not_equivalent(held: HeldWorkload, previous: models.Workload, now: models.Workload) -> str:
    """Why a suspended job whose Workload holds quota no longer matches it, or "" (Kueue's
    EquivalentToWorkload for a suspended job, reconciler.go; equality.ComparePodSetSlices): the pod sets in
    order, each with its count and minCount, as either the pod sets the job is expected to run with
    (``held.running``, expectedRunningPodSets: a partially admitted Job stopped, by an eviction or by hand,
    before its parallelism is given back) or the Workload object's own (``held.counts``) have them; and, unless
    the workload is admitted too (WithIgnoreTolerations), each one's tolerations, as last published
    (``previous``). Not compared, as Kueue does not: node selectors and affinities, which a suspended Job's
    template may change without a new Workload; nor requests, which the log keeps as effective ones (they move
    with LimitRanges and RuntimeClasses, which Kueue's template comparison does not see; a Job's containers
    are immutable anyway)."""
    tolerations = ""
    if not held.admitted and len(previous.spec.pod_sets) == len(now.spec.pod_sets):
        for before, after in zip(previous.spec.pod_sets, now.spec.pod_sets, strict=True):
            if before.tolerations != after.tolerations:
                tolerations = f"pod set {after.name}: its tolerations changed"
                break
    counts = _counts(now)
    if held.running is not None and _same_counts(counts, held.running):
        return tolerations
    if len(counts) != len(held.counts):
        return f"{len(counts)} pod sets, the workload has {len(held.counts)}"
    for (name, count, min_count), (_, held_count, held_min) in zip(counts, held.counts, strict=True):
        if count != held_count:
            return f"pod set {name}: {count} pods, the workload reserved quota for {held_count}"
        if min_count != held_min:
            return f"pod set {name}: minCount {min_count}, the workload has {held_min}"
    return tolerations


def _same_counts(a: tuple[tuple[str, int, int | None], ...], b: tuple[tuple[str, int, int | None], ...]) -> bool:
    """Whether two lists of pod sets (name, count, minCount) have the same counts and minCounts in order (Kueue's
    ComparePodSetSlices compares no names)."""
    return len(a) == len(b) and all(x[1:] == y[1:] for x, y in zip(a, b, strict=True))


def _gone_version(obj: objects.KubeObject) -> str:
    """The Msg-Id version of the ObjectDeleted of a Workload object seen going (marked for deletion or deleted):
    :func:`~kueue_es.jobframework.workloads.object_gone_version` of its UID, the dispatcher's for the same deletion
    (``deleted@<resourceVersion>`` for an object without one)."""
    object_uid = objects.uid_of(obj)
    return workloads.object_gone_version(object_uid) if object_uid else f"deleted@{objects.resource_version(obj)}"


def _finished_object(obj: objects.KubeObject) -> bool:
    """Whether a Workload object's Finished condition is True."""
    conditions = (cast(Mapping[str, Any], obj).get("status") or {}).get("conditions") or []
    return any(isinstance(c, dict) and c.get("type") == "Finished" and c.get("status") == "True" for c in conditions)


def _orphaning(obj: objects.KubeObject) -> bool:
    """Whether a job is being deleted with propagationPolicy Orphan (``deletionTimestamp`` and the ``orphan``
    finalizer): its dependents, its Workload among them, are to outlive it."""
    meta = objects.meta(obj)
    return bool(meta.get("deletionTimestamp")) and ORPHAN_FINALIZER in (meta.get("finalizers") or [])


def _deletion_ms(obj: objects.KubeObject) -> int:
    """The object's ``deletionTimestamp`` in ms (seconds precision); 0 when it has none (deleted at once, with no
    finalizer) or an unreadable one."""
    try:
        return manifests.parse_time_ms(objects.meta(obj).get("deletionTimestamp"))
    except manifests.ManifestError:
        return 0


def own_priority_of(obj: objects.KubeObject) -> OwnPriority | None:
    """The ``spec.priority`` a user set on a job's Workload object, with its ``priorityClassRef`` then as
    ``(kind, name)`` (None for none); None when its value is the dispatcher's: ``metadata.managedFields`` name no
    manager other than the dispatcher's server-side apply (:data:`~kueue_es.jobframework.annotations.
    DISPATCHER_FIELD_MANAGER`) as an owner of ``spec.priority`` (``kubectl patch kwl X --type=merge -p
    '{"spec":{"priority":5000}}'`` is manager ``kubectl-patch``'s update; an apply of the same value by the
    dispatcher afterwards shares the field, a forced one of another value takes it). An object without
    managedFields tells nothing: None."""
    raw = cast(Mapping[str, Any], obj)
    spec = raw.get("spec") or {}
    value = spec.get("priority")
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    entries = (raw.get("metadata") or {}).get("managedFields")
    owned = False
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict):
            continue
        if entry.get("manager") == DISPATCHER_FIELD_MANAGER and entry.get("operation") == "Apply":
            continue
        fields = (entry.get("fieldsV1") or {}).get("f:spec")
        if isinstance(fields, dict) and "f:priority" in fields:
            owned = True
            break
    if not owned:
        return None
    ref = spec.get("priorityClassRef")
    if isinstance(ref, dict) and ref.get("name"):
        return (str(ref.get("kind") or "WorkloadPriorityClass"), str(ref["name"])), value
    return None, value
