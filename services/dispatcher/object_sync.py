"""Keeping Kueue's own objects in step with the log: Workload objects and queue status.

Why this module exists: besides the jobs, Kueue's controllers keep objects users
read with kubectl: for every workload made from a job, the ``kueue.x-k8s.io/v1beta2``
Workload object (owner reference to the job) and its status (admission, conditions
with Kueue's reasons and messages); and the status of every ClusterQueue and
LocalQueue (pending, reserving and admitted workloads, flavorsReservation,
flavorsUsage). The pure part, what they should say, is
:mod:`kueue_es.services.dispatcher.status`; this module writes it.

All are server-side applied with the dispatcher's field manager, but for ``spec.active`` of a Workload:
that field is its user's once Kueue has written it (a reactivation sets it true again), so the applied
object never carries it, and Kueue's deactivation (WorkloadDeactivated) is written once as a merge patch
(:meth:`WorkloadSync._deactivate`). Writes are
compared with the last state the server returned (:class:`StoredObjects`, listed at
start-up), so a redelivered decision, a restart or an unchanged queue writes
nothing. A write that fails with 5xx, 429, a conflict or a broken connection is
tried again later (at the next batch, or a second later); another failure of a Workload write is recorded as
DispatchFailed (action ``SyncWorkload``). Every write waits for the write limiter, in
its class: Workload writes ``workloads``, queue status ``queues``
(:mod:`.write_budget`). Only the workloads of a batch's decisions are written in the
batch; the other Workloads, and queue status (coalesced, :class:`QueueStatusSync`), are
written apart from the batches, so a flood of them never holds up a decision.

``status.admissionChecks`` is shared with the admission check controllers, which set
each entry's state through the API (SEMANTICS-ADVANCED B.1); MultiKueue's checks are
kueue-es's own (the multikueue decider's, on the log), written as the log has them. A status write that
carries the entries first reads the Workload and keeps what a controller wrote
(:func:`keep_controller_checks`): the dispatcher only adds entries Pending and resets
them after an eviction; every other state it knows is the controller's own, read
back by the watcher. The write names the resourceVersion it read, so a controller's
write in between makes it fail with 409 and it is tried again at the next batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

import structlog

from kueue_es.events import labels, manifests, models, slices, subjects, types
from kueue_es.events.bus.base import Bus
from kueue_es.jobframework import integrations, prebuilt, workload_webhook, workloads
from kueue_es.jobframework import pods as pod_integration
from kueue_es.projections.cluster import ClusterState, WorkloadState
from kueue_es.services.dispatcher import core, kube_events, status
from kueue_es.services.dispatcher.kube_api import KubeApi, RawObject, WriteLimiter
from kueue_es.services.dispatcher.write_budget import Coalescer, WriteClass
from kueue_es.services.kube import errors as kube_errors
from kueue_es.services.kube import objects, resources
from kueue_es.services.kube.objects import ObjectKey
from kueue_es.services.runtime import wall_clock_ms

log = structlog.get_logger(__name__)

SYNC_WORKLOAD = "SyncWorkload"
T = TypeVar("T")
API_ERRORS = (kube_errors.ApiError, kube_errors.ConnectionFailedError)


def retryable(err: Exception) -> bool:
    """A failure worth trying again as it is: the server is busy or down, or the object moved under us."""
    if isinstance(err, kube_errors.ConnectionFailedError):
        return True
    return isinstance(err, kube_errors.ApiError) and (err.status >= 500 or err.status in (409, 429))


class StoredObjects:
    """The server's last answer for each Workload, ClusterQueue and LocalQueue the dispatcher keeps, and the
    applies and deletes that keep it (counted in :attr:`writes` and :attr:`failures`)."""

    def __init__(self, *, api: KubeApi, limiter: WriteLimiter, field_manager: str) -> None:
        self.api, self.limiter, self.field_manager = api, limiter, field_manager
        self.objects: dict[ObjectKey, objects.StoredObject] = {}
        # a job's UID (the Workload object's kueue.x-k8s.io/job-uid label) -> its Workload object's UID (not an
        # elastic job's replacement slice's: the first slice's), and a replacement slice's UID on the log -> its
        # Workload object's UID
        self._by_job_uid: dict[str, str] = {}
        self._by_slice_uid: dict[str, str] = {}
        self.absent: set[ObjectKey] = set()  # queues the API server does not have (until observed again)
        self.writes = 0
        self.failures = 0

    async def prime(self) -> None:
        """Learn what the server holds of the objects we keep, so unchanged ones are not written again."""
        kinds = (
            (resources.WORKLOADS, None),  # pod groups' Workloads have no job-uid label
            (resources.CLUSTER_QUEUES, None),
            (resources.LOCAL_QUEUES, None),
            (resources.COHORTS, None),
        )
        for ref, selector in kinds:
            try:
                items, _ = await self.api.list_objects(ref, label_selector=selector)
            except API_ERRORS as err:
                log.warning("prime_failed", kind=ref.kind, error=str(err))
                continue
            for item in items:
                stored = objects.as_stored(item)
                meta = objects.meta(stored)
                namespace = meta.get("namespace", "") if ref.namespaced else ""
                self.keep((ref.kind, namespace, meta.get("name", "")), stored)

    def observed(self, event: types.Event) -> None:
        """A queue seen (again) in the cluster may now take its status. One made again under the same name
        (another UID) is a new object with no status: what was stored of the old one is forgotten, so its
        status is written whole (else a LocalQueue deleted and created again showed none until a count
        changed, with the old object's transition times)."""
        match event:
            case types.ClusterQueueObserved(cluster_queue=obj):
                ident: ObjectKey = ("ClusterQueue", "", obj.metadata.name)
            case types.LocalQueueObserved(local_queue=obj):
                ident = ("LocalQueue", obj.metadata.namespace, obj.metadata.name)
            case types.CohortObserved(cohort=obj):
                ident = ("Cohort", "", obj.metadata.name)
            case _:
                return
        self.absent.discard(ident)
        stored = self.objects.get(ident)
        uid = obj.metadata.uid
        if stored is not None and uid and objects.meta(stored).get("uid", uid) != uid:
            del self.objects[ident]

    async def apply(
        self,
        ref: resources.ResourceRef,
        body: RawObject,
        *,
        subresource: str | None = None,
        write_class: WriteClass = WriteClass.WORKLOADS,
    ) -> objects.StoredObject:
        """Server-side apply ``body`` (or its status) with a token of ``write_class``; returns the stored object."""
        meta = body["metadata"]
        await self.limiter.acquire(write_class)
        stored = await self.api.apply_object(
            ref,
            namespace=meta.get("namespace"),
            name=meta["name"],
            body=body,
            field_manager=self.field_manager,
            subresource=subresource,
        )
        self.writes += 1
        return objects.as_stored(stored)

    async def patch(
        self, ref: resources.ResourceRef, meta: Any, patch: RawObject, *, subresource: str | None = None
    ) -> objects.StoredObject:
        """JSON merge patch the object ``meta`` names (its ``namespace`` and ``name``; or its ``subresource``) with
        a Workload write token; returns the stored object."""
        await self.limiter.acquire(WriteClass.WORKLOADS)
        stored = await self.api.patch_object(
            ref, namespace=meta.get("namespace"), name=meta["name"], patch=patch, subresource=subresource
        )
        self.writes += 1
        return objects.as_stored(stored)

    def keep(self, ident: ObjectKey, stored: objects.StoredObject) -> objects.StoredObject:
        """Remember the server's answer ``stored`` for ``ident``; returns it."""
        self.objects[ident] = stored
        if ident[0] == "Workload":
            meta = objects.meta(stored)
            job_uid = (meta.get("labels") or {}).get(status.JOB_UID_LABEL)
            if job_uid and meta.get("uid"):
                annotations = meta.get("annotations") or {}
                if slices.is_elastic(annotations) and annotations.get(slices.REPLACEMENT_FOR_ANNOTATION):
                    log_uid = slices.replacement_uid(job_uid=job_uid, name=str(meta.get("name") or ""))
                    self._by_slice_uid[log_uid] = meta["uid"]
                else:
                    self._by_job_uid[job_uid] = meta["uid"]
        return stored

    def object_uid(self, log_uid: str) -> str:
        """The Workload object UID of the workload whose UID on the log is ``log_uid``: a workload made from a
        job has its job's UID there (:func:`~kueue_es.jobframework.workloads.new_workload`), so it is the
        object labelled with that job UID (an elastic job's first slice); an elastic job's replacement slice
        has one of its own (:func:`~kueue_es.events.slices.replacement_uid`), so it is the replacement object
        of that job and name; "" when no such object is known (a Workload created as such has its object's
        UID on the log already)."""
        return self._by_job_uid.get(log_uid) or self._by_slice_uid.get(log_uid, "")

    def workload_uid(self, namespace: str, name: str) -> str:
        """The UID the server gave Workload ``namespace/name`` ("" if we have not seen it)."""
        stored = self.objects.get(("Workload", namespace, name)) or {}
        return objects.meta(stored).get("uid", "")

    def workload_created_ms(self, namespace: str, name: str) -> int:
        """The ``metadata.creationTimestamp`` the server gave Workload ``namespace/name`` (ms since the epoch; 0 if
        we have not seen it)."""
        return created_ms(self.objects.get(("Workload", namespace, name)))

    def resource_version(self, namespace: str, name: str) -> str:
        """The resourceVersion of Workload ``namespace/name`` as last written or read ("" if we have not seen it)."""
        stored = self.objects.get(("Workload", namespace, name)) or {}
        return str(objects.meta(stored).get("resourceVersion") or "")

    async def delete_workload(self, namespace: str, name: str) -> None:
        """The Job is gone, or its Workload was deleted by hand and its job stopped: so is the Workload object,
        Kueue's finalizer taken off first (Kueue's workload.Delete, FinalizeOrphanedWorkload). A real cluster's
        garbage collector deletes a Job's Workload (owner reference); the emulator has none. Only an object we
        wrote or listed is deleted, once. An API error other than 404 propagates (tried again later)."""
        ident: ObjectKey = ("Workload", namespace, name)
        if ident not in self.objects:
            return
        if not await self.let_go(namespace, name, deleting=True):
            await self.limiter.acquire(WriteClass.WORKLOADS)
            try:
                await self.api.delete_object(resources.WORKLOADS, namespace=namespace, name=name)
            except kube_errors.NotFoundError:
                pass
            else:
                self.writes += 1
        self.objects.pop(ident, None)

    async def let_go(self, namespace: str, name: str, *, deleting: bool = False) -> bool:
        """Take Kueue's finalizer off Workload ``namespace/name`` as the server has it now, when it is marked for
        deletion (or ``deleting``: it is about to be), keeping the other finalizers; returns whether the object
        is gone or going (marked for deletion). A write that lost a race (409) propagates: tried again later."""
        try:
            current = await self.api.get_object(resources.WORKLOADS, namespace=namespace, name=name)
        except kube_errors.NotFoundError:
            return True
        meta = current.get("metadata") or {}
        terminating = bool(meta.get("deletionTimestamp"))
        present = list(meta.get("finalizers") or [])
        if RESOURCE_IN_USE_FINALIZER in present and (terminating or deleting):
            kept = [f for f in present if f != RESOURCE_IN_USE_FINALIZER]
            patch = {"metadata": {"finalizers": kept, "resourceVersion": meta.get("resourceVersion")}}
            await self.limiter.acquire(WriteClass.WORKLOADS)
            try:
                await self.api.patch_object(resources.WORKLOADS, namespace=namespace, name=name, patch=patch)
            except kube_errors.NotFoundError:
                return True
            self.writes += 1
            log.info("workload_finalizer_removed", workload=f"{namespace}/{name}")
        return terminating


class WorkloadSync:
    """Brings the Workload object and status of every changed workload made from a Job up to date; the
    Workload it creates is told to ``created`` (key, its CreatedWorkload Event if any, UID: recorded after the batch),
    one it writes Finished to ``finished`` (its job's FinishedWorkload Event, the object's UID), one it writes with
    another WorkloadPriorityClass, or with the new shape of a waiting job, to ``updated`` (its job's UpdatedWorkload
    Event, the log sequence of the change).
    A write the server refuses is recorded as DispatchFailed ``SyncWorkload``, published through
    ``record`` when given (the dispatcher's results, without waiting: a publish that keeps failing
    holds no decision), else awaited.

    The workloads of a batch's decisions are written in the batch, before its Job writes
    (:meth:`sync` with their keys: Kueue's Workload says Admitted before its Job runs); every
    other changed workload by :meth:`run`, apart from the batches, so a flood of them (many
    Jobs created at once) never holds up a decision. One workload is written at a time.
    """

    def __init__(
        self,
        *,
        bus: Bus,
        cluster: str,
        view: core.DispatchState,
        stored: StoredObjects,
        created: Callable[[str, kube_events.KubeEvent | None, str], None],
        record: Callable[[Awaitable[Any]], None] | None = None,
        group_members: Callable[[str, str], list[tuple[str, str]]] | None = None,
        absent_pods: Callable[[str, str, list[tuple[str, int]]], int | None] | None = None,
        group_written: Callable[[str, str], None] | None = None,
        deleted: Callable[[kube_events.KubeEvent, str], None] | None = None,
        finished: Callable[[kube_events.KubeEvent, str], None] | None = None,
        updated: Callable[[kube_events.KubeEvent, int], None] | None = None,
        job_event: Callable[[kube_events.KubeEvent, str], None] | None = None,
    ) -> None:
        self.bus, self.cluster, self.view = bus, cluster, view
        self.stored, self.created, self.record = stored, created, record
        self.deleted = deleted  # (its job's DeletedWorkload Event, the old object's UID) of a not-matching one
        self.finished = finished  # (its job's FinishedWorkload Event, the object's UID) of one just written Finished
        self.updated = updated  # (its job's UpdatedWorkload Event, the sequence of the change) of one just rewritten
        self.group_members = group_members  # a pod group's pods (name, UID), by namespace and group: its owners
        # the pods a pod group lacks against its pod sets (role hash, count), None when none of its pods is watched
        self.absent_pods = absent_pods
        # told of a pod group's Workload object just written (its owners may now name its replacement pods)
        self.group_written = group_written
        self.job_event = job_event  # (a job's or pod's Event, the end of its name): UpdatedAdmissionCheck
        # workload key -> the pending checks' message its job was last told (UpdatedAdmissionCheck)
        self._check_messages: dict[str, str] = {}
        self._writing = asyncio.Lock()  # the batch's writes and run()'s never interleave
        # workloads whose Workload or job the retention policies deleted, by key -> the UID of the workload on the
        # log: not written again (it would be made anew) until the fold forgets them (their ObjectDeleted)
        self.retired: dict[str, str] = {}
        # workload key -> (the observed workload, its job's pod templates by pod set): _job_templates
        self._templates: dict[str, tuple[Any, dict[str, Any]]] = {}
        # workload key -> (its UID on the log, WorkloadRecord.deactivations) of the last deactivation written
        self._deactivations: dict[str, tuple[str, int]] = {}
        # workload key -> the spec fields its user writes on a job's Workload object (:func:`_user_spec`) as the log
        # had them at its last status write: a change since is a spec write the server's last answer predates
        self._user_specs: dict[str, tuple[Any, ...]] = {}

    def _take(self, keys: Iterable[str] | None) -> dict[str, int]:
        if keys is None:
            return self.view.take_dirty_workloads()
        dirty = self.view.dirty_workloads
        return {key: dirty.pop(key) for key in dict.fromkeys(keys) if key in dirty}

    async def sync(self, keys: Iterable[str] | None = None) -> bool:
        """Write every workload the fold marked dirty (only those of ``keys`` when given): its object and status,
        or its deletion. Returns False when a write failed and is to be tried again (the workload stays dirty)."""
        async with self._writing:  # after run()'s write under way, if any
            return await self._sync(self._take(keys))

    async def retire(self, key: str, uid: str, delete: Callable[[], Awaitable[T]]) -> T:
        """Run ``delete`` (the retention policies' deletion of workload ``key``'s Workload or job) between two
        writes of Workload objects, and write the workload (log UID ``uid``) no more: a write after the object is
        gone would make it anew. Its deletion on the log lets go of it (:meth:`_sync`); a ``delete`` that raises,
        at once."""
        async with self._writing:
            self.retired[key] = uid
            try:
                return await delete()
            except BaseException:
                self.retired.pop(key, None)
                raise

    async def run(self, *, ready: Callable[[], bool], every: float = 1.0) -> None:
        """Every ``every`` seconds while ``ready()``, write the workloads dirty then, one at a time, oldest change
        first (cancel to stop). Changes within that time are written once (a Job observed and admitted in the
        same second: one write, by the batch of its admission); a failed write waits for the next round."""
        while True:
            await asyncio.sleep(every)
            if not ready():
                continue
            for key in list(self.view.dirty_workloads):
                if not await self.sync([key]):
                    break

    def _releases_first(self, taken: dict[str, int]) -> dict[str, int]:
        """``taken`` after every workload whose released quota its status does not show yet, oldest release
        first (taken out of the dirty set too): Kueue admits a workload only once the quota it needs is
        released, and its Workload status says so before the admission's, so a write that shows an admission
        never comes before the write that shows an earlier release (a workload written in another order,
        by when it last changed, showed both admitted at once under a small write budget)."""
        releases = self.view.unwritten_releases
        if not releases:
            return taken
        dirty = self.view.dirty_workloads
        first: dict[str, int] = {}
        for key in sorted(releases, key=releases.__getitem__):
            if key in taken:
                first[key] = taken[key]
            elif key in dirty:
                first[key] = dirty.pop(key)
            else:  # written since (a sync of it takes it out of both)
                del releases[key]
        return {**first, **taken} if first else taken

    async def _sync(self, taken: dict[str, int]) -> bool:
        state = self.view.cluster
        done = True
        taken = self._releases_first(taken)
        # a replaced elastic slice after its replacement: its Finished message names the new object's UID
        order = sorted(taken, key=lambda k: _replaced(state.workloads.get(k)))
        for key, seq in ((k, taken[k]) for k in order):
            wl = state.workloads.get(key)
            namespace, _, name = key.partition("/")
            if (wl is not None and wl.deleted_seq and wl.reservation is not None) or key in self.view.deleted_stops:
                # its Workload deleted by hand: Kueue's finalizer holds the object until the quota is released
                # and the job's stop written (the release and forget_deleted_stop mark it dirty again)
                continue
            if wl is not None and not wl.deleted_seq and self.retired.get(key) == wl.workload.metadata.uid:
                continue  # deleted by the retention policies: its ObjectDeleted is on its way
            if wl is None or wl.deleted_seq:
                self.retired.pop(key, None)
            released = self.view.unwritten_releases.pop(key, None)  # shown by this write (a later one: added again)
            try:
                if (
                    self.view.deleted_workloads.pop(key, 0) is None
                    and wl is not None
                    and not wl.deleted_seq
                    and not prebuilt.is_adopted(wl.workload)  # a prebuilt one made again is its user's, not ours
                ):
                    # deleted and observed again since last written (its Workload deleted by hand, or no longer
                    # matching its job, and the job has a new one): the object kept goes (the finalizer off; one not
                    # marked for deletion is deleted, as Kueue's ensureOneWorkload deletes a workload that no
                    # longer matches), and the new one is created
                    self.view.deleted_workloads[key] = None  # until the old object is let go of
                    old_uid = self.stored.workload_uid(namespace, name)
                    if not await self.stored.let_go(namespace, name):
                        await self.stored.delete_workload(namespace, name)
                    del self.view.deleted_workloads[key]
                    if self.view.not_matching.pop(key, 0) is None and self.deleted is not None:
                        item = kube_events.for_deleted_not_matching(wl.workload, at_ms=wall_clock_ms())
                        if item is not None:
                            self.deleted(item, old_uid)
                    self.stored.objects.pop(("Workload", namespace, name), None)
                    self._templates.pop(key, None)  # the new one takes its job's templates as they are now
                if wl is None or wl.deleted_seq:
                    self._templates.pop(key, None)
                    self._check_messages.pop(key, None)
                    self._deactivations.pop(key, None)
                    self._user_specs.pop(key, None)
                    self.view.checks_reported.pop(key, None)
                    await self.stored.delete_workload(namespace, name)
                    continue
                if wl.workload.owner is None:
                    await self._sync_standalone(key, wl)
                    continue
                if prebuilt.is_adopted(wl.workload):
                    await self._sync_prebuilt(key, wl)
                    self._tell_checks(key, wl, seq=seq)
                    continue
                if not status.is_job_workload(wl):
                    continue
                try:
                    await self._sync_workload(key, wl, seq=seq)
                except kube_errors.NotFoundError:
                    # deleted behind our back (kubectl delete workload): what we kept of it is stale, so
                    # write it afresh, created again as its job's reconciler would
                    log.info("workload_object_gone", workload=key)
                    self.stored.objects.pop(("Workload", namespace, name), None)
                    await self._sync_workload(key, wl, seq=seq)
            except API_ERRORS as err:
                if retryable(err):
                    log.warning("workload_sync_retry", workload=key, error=str(err))
                    self.view.dirty_workloads.setdefault(key, seq)
                    if released is not None:  # still to be shown before any admission
                        self.view.unwritten_releases.setdefault(key, released)
                    done = False
                    continue
                assert isinstance(err, kube_errors.ApiError)
                if wl is None or wl.deleted_seq:
                    self.stored.objects.pop(("Workload", namespace, name), None)  # not ours to delete, it seems
                    log.warning("workload_delete_failed", workload=key, status=err.status, error=str(err))
                else:
                    await self._sync_failed(wl, seq=seq, err=err)
        return done

    async def _sync_workload(self, key: str, wl: WorkloadState, *, seq: int) -> None:
        """The Workload object of a job's workload (``seq``: the last log sequence that changed it), then its
        status; the job's Events on what the writes did (CreatedWorkload, UpdatedWorkload).

        An object the server returned without the job's owner reference (:func:`_reference_taken_off`: the
        garbage collector's part of ``kubectl delete job --cascade=orphan``, or a user's edit) is not written
        again, but for its status: Kueue's job reconciler never puts the reference back, its workload
        controller finishes such a Workload OwnerNotFound (workload_controller.go isOrphanedWorkload), as the
        watcher reports it; an apply that restored the reference would have the garbage collector delete it."""
        meta = wl.workload.metadata
        ident: ObjectKey = ("Workload", meta.namespace, meta.name)
        templates = await self._job_templates(key, wl)
        desired = status.workload_object(wl, self.view.cluster, templates=templates, members=self._members(wl))
        stored = self.stored.objects.get(ident)
        if stored is not None and _applies_active(stored, self.stored.field_manager):
            stored = self.stored.keep(ident, await self._release_active(stored))
        if stored is not None and _reference_taken_off(stored, desired):
            log.info("workload_orphaned_not_rewritten", workload=key)
        elif (
            stored is None
            or not _contains(stored, desired)
            or _uid_owner(stored) != _uid_owner(desired)
            or (RESOURCE_IN_USE_FINALIZER in _finalizers(stored))
            != (RESOURCE_IN_USE_FINALIZER in desired["metadata"].get("finalizers", ()))
        ):
            created = stored is None
            before = {} if stored is None else stored.get("spec") or {}
            # what Kueue's reconciler would have read: the object as stored (a change and the admission that follows
            # it may be written at once here)
            reserved = stored is not None and _has_condition(stored.get("status"), "QuotaReserved")
            owners = _owner_refs(stored)
            stored = self.stored.keep(ident, await self.stored.apply(resources.WORKLOADS, desired))
            if not created:
                self._tell_owners_added(wl, before=owners, after=_owner_refs(stored))
            if self.group_written is not None and meta.annotations.get(status.GROUP_WORKLOAD_ANNOTATION) == "true":
                self.group_written(meta.namespace, meta.name)
            if created:
                uid = str(objects.meta(stored).get("uid") or "")
                self.created(key, kube_events.for_created_workload(wl.workload), uid)
            elif self.updated is not None:
                updated = kube_events.for_workload_update(
                    wl.workload,
                    before=before,
                    after=desired["spec"],
                    reserved=reserved,
                    at_ms=wall_clock_ms(),
                )
                if updated is not None:
                    self.updated(updated, seq)
        stored = await self._deactivate(key, wl, ident) or stored
        await self._sync_status(key, wl, ident, stored)
        self._tell_checks(key, wl, seq=seq)

    async def _release_active(self, stored: objects.StoredObject) -> objects.StoredObject:
        """Hand over ``spec.active`` of a Workload object an earlier dispatcher applied it on: the field is taken
        out of the dispatcher's apply entry in ``metadata.managedFields`` (an update that names the object's
        resourceVersion: a write in between fails with 409 and is tried again). Else the first apply without
        the field would remove it, as server-side apply removes what its manager applied before and no longer
        applies, and the API server would default it to true: a deactivated Workload reactivated by an upgrade.
        The value stays as it is; no one owns it until its user sets it."""
        meta = objects.meta(stored)
        entries = _without_applied_active(_managed_fields(stored), self.stored.field_manager)
        patch = {"metadata": {"managedFields": entries, "resourceVersion": meta.get("resourceVersion")}}
        released = await self.stored.patch(resources.WORKLOADS, meta, patch)
        log.info("workload_active_released", workload=f"{meta.get('namespace')}/{meta.get('name')}")
        return released

    async def _deactivate(self, key: str, wl: WorkloadState, ident: ObjectKey) -> objects.StoredObject | None:
        """Write ``spec.active: false`` on the Workload object of a workload the log deactivated, once per
        WorkloadDeactivated (:func:`~kueue_es.services.dispatcher.status.deactivation_unwritten`), as Kueue's
        workload controller writes it once (workload_controller.go). A JSON merge patch, not part of the applied
        object: the field is then its user's, and setting it true again (a reactivation) is never undone by a
        later apply of an older log value. The patch names the object's UID (a namesake made since is refused,
        409). Returns the object as the server stored it, None when nothing was written."""
        record = self.view.records.get(key)
        if not status.deactivation_unwritten(record):
            return None
        assert record is not None
        mark = (wl.workload.metadata.uid, record.deactivations)
        if self._deactivations.get(key) == mark:
            return None
        patch: dict[str, Any] = {"spec": {"active": False}}
        uid = self.stored.workload_uid(ident[1], ident[2])
        if not uid and (wl.workload.owner is None or prebuilt.is_adopted(wl.workload)):
            uid = wl.workload.metadata.uid  # a Workload made as such: the log has its object's UID
        if uid:
            patch["metadata"] = {"uid": uid}
        stored = self.stored.keep(
            ident, await self.stored.patch(resources.WORKLOADS, {"namespace": ident[1], "name": ident[2]}, patch)
        )
        self._deactivations[key] = mark
        log.info("workload_deactivation_written", workload=key, deactivation=record.deactivations)
        return stored

    def _tell_owners_added(self, wl: WorkloadState, *, before: list[Any], after: list[Any]) -> None:
        """A pod group's Workload object just written naming more of its pods as owners (``before``, ``after``:
        its ownerReferences): its OwnerReferencesAdded, named after the pods added (written once)."""
        item = kube_events.for_owners_added(wl.workload, before=before, after=after, at_ms=wall_clock_ms())
        if item is None or self.job_event is None:
            return
        present = {ref.get("uid") for ref in before}
        added = sorted(str(ref.get("uid")) for ref in after if ref.get("uid") not in present)
        digest = hashlib.sha256(",".join(added).encode()).hexdigest()[:10]
        self.job_event(item, f"owners.{digest}")

    def _tell_checks(self, key: str, wl: WorkloadState, *, seq: int) -> None:
        """The job's UpdatedAdmissionCheck once its Workload, written, waits for checks whose controllers left a
        message (:func:`~kueue_es.services.dispatcher.kube_events.pending_checks_message`), whenever that message
        changes (Kueue records it at every reconcile of the job; its recorder counts the repeats on one Event).
        The Event is named after ``seq``, the change's log sequence: a restart writes none twice."""
        message = kube_events.pending_checks_message(self.view.records.get(key))
        if self._check_messages.get(key, "") == message:
            return
        if not message:
            del self._check_messages[key]
            return
        self._check_messages[key] = message
        if self.job_event is None:
            return
        for item in kube_events.for_admission_check_update(
            wl.workload, message, members=self._members(wl), at_ms=wall_clock_ms()
        ):
            self.job_event(item, f"{seq:x}.checks")

    def _members(self, wl: WorkloadState) -> list[tuple[str, str]]:
        """The pods of the pod group whose workload ``wl`` is, as ``(name, uid)`` (its Workload's owners); none for
        another workload or when no pod is watched."""
        meta = wl.workload.metadata
        if self.group_members is None or meta.annotations.get(status.GROUP_WORKLOAD_ANNOTATION) != "true":
            return []
        return self.group_members(meta.namespace, meta.name)

    async def _sync_status(
        self, key: str, wl: WorkloadState, ident: ObjectKey, stored: objects.StoredObject, *, again: bool = True
    ) -> None:
        """Kueue's status on a job's Workload object (``stored``: as the server last returned it).

        Every condition carries the object's ``metadata.generation`` at the time of the write, as Kueue stamps
        each condition it sets. A user's write of the object's spec (``kubectl patch kwl X -p
        '{"spec":{"active":false}}'``) moves the generation without the dispatcher writing: once the log shows
        it (:func:`_user_spec` changed since the last status write) the object is read first; and a write whose
        answer shows a later generation than the one stamped (a spec write that landed meanwhile, or one the log
        does not carry) is made again with it (``again``: once)."""
        meta = wl.workload.metadata
        user_spec = _user_spec(wl)
        if self._user_specs.get(key, user_spec) != user_spec:
            current = await self.stored.api.get_object(resources.WORKLOADS, namespace=meta.namespace, name=meta.name)
            stored = self.stored.keep(ident, objects.as_stored(current))
        self._user_specs[key] = user_spec
        generation = int(objects.meta(stored).get("generation") or 0)
        wanted = status.workload_status(self.view.records.get(key), generation=generation)
        wanted = status.replaced_slice_status(
            wanted, key=key, state=self.view.cluster, workload_uid=self.stored.workload_uid
        )
        wanted = status.with_object_uids(wanted, self.stored.object_uid)
        wanted = self._with_replacement_condition(wl, stored, wanted, generation=generation)
        wanted = status.not_before(wanted, created_ms(stored))
        # a check controller wrote the list: read it, and write it again where it is not the ClusterQueue's
        reported = self.view.checks_reported.pop(key, 0) is None
        if _managed(stored, status.WORKLOAD_STATUS_FIELDS) != wanted or reported:
            identity: dict[str, Any] = {
                "apiVersion": resources.WORKLOADS.api_version,
                "kind": "Workload",
                "metadata": {"name": meta.name, "namespace": meta.namespace},
            }
            body = {**identity, "status": wanted}
            if "admissionChecks" in wanted or reported:
                current = await self.stored.api.get_object(
                    resources.WORKLOADS, namespace=meta.namespace, name=meta.name
                )
                server = (current.get("status") or {}).get("admissionChecks") or []
                own = set(self.view.cluster.multikueue.checks)  # MultiKueue's: kueue-es is their controller
                checks = keep_controller_checks(
                    wanted.get("admissionChecks") or [],
                    server,
                    own=own,
                    reset=status.reset_reports(self.view.records.get(key)),
                )
                if _managed(stored, status.WORKLOAD_STATUS_FIELDS) == wanted and server == checks:
                    self.stored.keep(ident, objects.as_stored(current))
                    return  # the list is the ClusterQueue's, and nothing else changed
                version = (current.get("metadata") or {}).get("resourceVersion")
                if _strays(server, checks):
                    # an entry the ClusterQueue does not name (written by hand): Kueue's workload controller
                    # writes the list whole (syncAdmissionCheckConditions, a status Update); an apply would keep
                    # an entry another manager wrote, so the list is replaced first, on the version read
                    replaced = {"metadata": {"resourceVersion": version}, "status": {"admissionChecks": checks or None}}
                    where = {"namespace": meta.namespace, "name": meta.name}
                    patched = await self.stored.patch(resources.WORKLOADS, where, replaced, subresource="status")
                    version = objects.meta(patched).get("resourceVersion")
                    log.info("workload_checks_synced", workload=key, dropped=_strays(server, checks))
                if checks:
                    wanted = {**wanted, "admissionChecks": checks}
                body = {**identity, "status": wanted}
                body["metadata"] = {**body["metadata"], **({"resourceVersion": version} if version else {})}
            was_finished = _is_finished(stored.get("status"))
            first = nomination_first(stored.get("status"), wanted)
            if first is not None:  # the nomination and the choice came in one fold: the webhook wants them in turn
                nominated = await self.stored.apply(
                    resources.WORKLOADS, {**body, "status": first}, subresource="status"
                )
                if "resourceVersion" in body["metadata"]:
                    version = objects.meta(nominated).get("resourceVersion")
                    body["metadata"] = {**body["metadata"], "resourceVersion": version}
            gates = self.view.cluster.configuration.feature_gates
            cleared = admission_cleared_first(stored.get("status"), wanted, gates=gates)
            if cleared is not None:  # evicted and admitted again in one fold: the webhook wants the two apart
                emptied = await self.stored.apply(
                    resources.WORKLOADS, {**body, "status": cleared}, subresource="status"
                )
                if "resourceVersion" in body["metadata"]:
                    version = objects.meta(emptied).get("resourceVersion")
                    body["metadata"] = {**body["metadata"], "resourceVersion": version}
            stored = self.stored.keep(ident, await self.stored.apply(resources.WORKLOADS, body, subresource="status"))
            if not was_finished and _is_finished(wanted) and wl.finished is not None and self.finished is not None:
                # the job's reconciler records it once it wrote the Finished condition (reconciler.go step 3), at
                # that time (not the job's own finish time, which the condition keeps)
                item = kube_events.for_finished_workload(wl.workload, reason=wl.finished.reason, at_ms=wall_clock_ms())
                uid = str(objects.meta(stored).get("uid") or "")
                if item is not None and uid:
                    self.finished(item, uid)
            if again and int(objects.meta(stored).get("generation") or 0) > generation and wanted.get("conditions"):
                await self._sync_status(key, wl, ident, stored, again=False)

    def _with_replacement_condition(
        self, wl: WorkloadState, stored: objects.StoredObject, wanted: dict[str, Any], *, generation: int
    ) -> dict[str, Any]:
        """``wanted`` (a pod group's Workload status) with Kueue's WaitingForReplacementPods condition, which its
        pod reconciler keeps from the group's pods (:func:`kueue_es.jobframework.pods.replacement_condition`):
        True while the group lacks pods against its pod sets, False once they are replaced, from the condition
        the object has (``stored``). The dispatcher's view of the group's pods decides it, as Kueue's pod
        reconciler's does (the watcher's view puts the same on the log, ``Workload.waiting_for_replacement_pods``,
        for the admitter); no change for another workload or while no pod of the group is watched.
        A group on a prebuilt Workload (:func:`kueue_es.jobframework.prebuilt.group_on_prebuilt`: a StatefulSet's,
        a LeaderWorkerSet's, one adopted) lacks none: Kueue counts absent pods in FindMatchingWorkloads only,
        which its prebuilt path skips, so it never gets the condition (one it has turns False)."""
        meta = wl.workload.metadata
        if self.absent_pods is None or meta.annotations.get(status.GROUP_WORKLOAD_ANNOTATION) != "true":
            return wanted
        pod_sets = [(ps.name, ps.count) for ps in wl.workload.spec.pod_sets]
        absent = 0 if prebuilt.group_on_prebuilt(wl.workload) else self.absent_pods(meta.namespace, meta.name, pod_sets)
        conditions = [c for c in (stored.get("status") or {}).get("conditions") or [] if isinstance(c, dict)]
        existing = next((c for c in conditions if c.get("type") == pod_integration.WAITING_FOR_REPLACEMENT_PODS), None)
        if absent is None:
            if existing is None:
                return wanted
            condition: dict[str, Any] | None = existing  # kept as it is (it is ours: the status is applied whole)
        else:
            # the Evicted condition as written (its message names the preemptor's Workload object UID, which the
            # log's record does not have): Kueue copies it verbatim
            evicted = next(
                (c for c in wanted.get("conditions", []) if c.get("type") == "Evicted" and c.get("status") == "True"),
                None,
            )
            condition = pod_integration.replacement_condition(
                existing,
                absent=absent,
                evicted=(str(evicted.get("reason", "")), str(evicted.get("message", ""))) if evicted else None,
                generation=generation,
                now=manifests.format_time_ms(wall_clock_ms()),
            )
        if condition is None:
            return wanted
        return {**wanted, "conditions": [*wanted.get("conditions", []), condition]}

    async def _sync_prebuilt(self, key: str, wl: WorkloadState) -> None:
        """A job's prebuilt Workload (:func:`kueue_es.jobframework.prebuilt.is_adopted`): made the job's, as
        Kueue's job reconciler makes it (:func:`~kueue_es.services.dispatcher.status.adoption_patch`: the owner
        reference, the job-uid label, the job's LocalQueue; a pod group's pods each an owner), its spec otherwise
        the user's; then Kueue's status,
        as on any job's Workload. The object is read before it is patched, the patch carrying its UID and
        resourceVersion (a write in between fails with 409 and is tried again). One gone (404) is left to the
        watcher's deletion fact; one of another UID (made again under the name) waits for the log to have it."""
        meta = wl.workload.metadata
        ident: ObjectKey = ("Workload", meta.namespace, meta.name)
        stored = self.stored.objects.get(ident)
        members = self._members(wl)
        try:
            if (
                stored is None
                or objects.meta(stored).get("uid") != meta.uid
                or status.adoption_patch(stored, wl, members=members)
            ):
                current: Any = await self.stored.api.get_object(
                    resources.WORKLOADS, namespace=meta.namespace, name=meta.name
                )
                current_meta = current.get("metadata") or {}
                if current_meta.get("uid") != meta.uid:
                    log.info("prebuilt_workload_not_the_logs", workload=key, uid=current_meta.get("uid"))
                    return
                patch = status.adoption_patch(current, wl, members=members)
                if patch:
                    precondition = {"uid": meta.uid, "resourceVersion": current_meta.get("resourceVersion")}
                    patch["metadata"] = {**patch.get("metadata", {}), **precondition}
                    owners = _owner_refs(current)
                    current = await self.stored.patch(resources.WORKLOADS, current_meta, patch)
                    self._tell_owners_added(wl, before=owners, after=_owner_refs(current))
                    if self.group_written is not None and members:
                        self.stored.keep(ident, objects.as_stored(current))
                        self.group_written(meta.namespace, meta.name)
                    log.info(
                        "prebuilt_workload_adopted", workload=key, job=wl.workload.owner and wl.workload.owner.name
                    )
                stored = self.stored.keep(ident, objects.as_stored(current))
            stored = await self._deactivate(key, wl, ident) or stored
            await self._sync_status(key, wl, ident, stored)
        except kube_errors.NotFoundError:
            self.stored.objects.pop(ident, None)
            log.info("prebuilt_workload_not_in_cluster", workload=key)

    async def _job_templates(self, key: str, wl: WorkloadState) -> dict[str, Any]:
        """The pod templates of the workload's job by pod set name, read from the API server once per
        observation of the workload while it holds no quota (the job is suspended, nothing the dispatcher
        writes at a start is in them yet; Kueue's Workload keeps the templates of its creation), and kept
        while it runs or its object holds quota (after a restart, those of the Workload object as the server has
        it, read if not listed yet: Kueue's Workload webhook refuses new pod sets then). ``{}`` when the job is
        gone or its kind's templates are not the job's (a Pod group): the Workload's templates are then the log's. A retryable API error propagates (tried again later)."""
        cached = self._templates.get(key)
        # a ConcurrentAdmission parent's job runs with its variant's admission: as if the parent held it
        held = wl.reservation is not None or core.variant_holds_quota(self.view, wl)
        if cached is not None and (cached[0] is wl.workload or held):
            return cached[1]
        stored: Mapping[str, Any] | None = self.stored.objects.get(
            ("Workload", wl.workload.metadata.namespace, wl.workload.metadata.name)
        )
        if stored is None and (held or wl.finished is not None):
            # not listed yet (a restart): the object as the server has it, whose templates are kept if it holds
            # quota (the job may carry a start's changes, which Kueue's Workload webhook refuses in the pod sets
            # of a Workload holding quota, validateImmutablePodSets)
            stored = await self._workload_object(wl)
        # its job may carry a start's changes: keep the object's templates while the log or the object holds quota
        if stored is not None and (held or workload_webhook.holds_quota(stored)):
            spec: Any = stored.get("spec") or {}
            kept = {ps["name"]: ps["template"] for ps in spec.get("podSets") or [] if "name" in ps and "template" in ps}
            self._templates[key] = (wl.workload, kept)
            return kept
        owner = wl.workload.owner
        found: dict[str, Any] = {}
        single_pod = (
            owner is not None
            and (owner.api_version, owner.kind) == ("v1", "Pod")
            and not pod_integration.is_group_workload(wl.workload)
        )
        has_templates = owner is not None and (
            (owner.api_version, owner.kind) == ("batch/v1", "Job")
            or integrations.by_kind(owner.kind) is not None
            or single_pod  # its spec (a MultiKueue worker compares the Pod it runs with it)
        )
        if pod_integration.is_group_workload(wl.workload):
            try:
                found = await self._group_templates(wl)
            except (kube_errors.NotFoundError, kube_errors.UnknownKindError, KeyError, TypeError) as err:
                log.info("workload_group_templates_unread", workload=key, error=str(err))
        elif owner is not None and has_templates:
            try:
                ref = resources.ref_for(owner.api_version, owner.kind)
                job = await self.stored.api.get_object(ref, namespace=wl.workload.metadata.namespace, name=owner.name)
                if (job.get("metadata") or {}).get("uid", owner.uid) == owner.uid:  # not a namesake
                    found = dict(integrations.job_pod_templates(owner.api_version, owner.kind, job))
            except kube_errors.NotFoundError:
                pass
            except (kube_errors.UnknownKindError, manifests.ManifestError, KeyError, TypeError) as err:
                log.info("workload_job_templates_unread", workload=key, error=str(err))
        self._templates[key] = (wl.workload, found)
        return found

    async def _group_templates(self, wl: WorkloadState) -> dict[str, Any]:
        """The pod templates of a pod group's Workload, as Kueue builds them: a StatefulSet's group has its
        StatefulSet's template spec as its one pod set (statefulset_reconciler.go constructWorkload); any other
        group, per role (pod set named by the role hash), the spec of its first pod, by name, that is neither
        Failed nor being deleted (pod_controller.go constructGroupPodSets, constructPodSet: ``Template.Spec`` is the
        pod's). ``{}`` while no such pod is listed. The pods labelled with the group's name are listed first; the
        whole namespace only when they leave a role without a pod (members named by the annotation alone), so a
        namespace of many groups is not listed whole for each. Raises the API client's errors."""
        meta = wl.workload.metadata
        names = [ps.name for ps in wl.workload.spec.pod_sets]
        found: dict[str, Any] = {}
        if not labels.label_value_problems(meta.name):
            selector = f"{pod_integration.GROUP_NAME_KEY}={meta.name}"
            pods, _ = await self.stored.api.list_objects(
                resources.PODS, namespace=meta.namespace, label_selector=selector
            )
            found = await self._templates_of(_runnable_members(pods, meta.name), names, namespace=meta.namespace)
        if len(found) < len(names):
            pods, _ = await self.stored.api.list_objects(resources.PODS, namespace=meta.namespace)
            found = await self._templates_of(_runnable_members(pods, meta.name), names, namespace=meta.namespace)
        return found

    async def _templates_of(self, runnable: list[RawObject], names: list[str], *, namespace: str) -> dict[str, Any]:
        """:meth:`_group_templates` given the group's ``runnable`` members and its pod sets' ``names``."""
        for pod in runnable:
            owner = next(
                (o for o in (pod.get("metadata") or {}).get("ownerReferences") or [] if o.get("controller")), None
            )
            if owner is not None and owner.get("kind") == "StatefulSet" and len(names) == 1:
                sts = await self.stored.api.get_object(
                    resources.ref_for("apps/v1", "StatefulSet"), namespace=namespace, name=owner["name"]
                )
                spec = ((sts.get("spec") or {}).get("template") or {}).get("spec") or {}
                return {names[0]: {"spec": dict(spec)}}
        found: dict[str, Any] = {}
        for pod in runnable:
            role = _role(pod)
            if role in names and role not in found:
                found[role] = {"spec": dict(pod.get("spec") or {})}
        return found

    async def _workload_object(self, wl: WorkloadState) -> Mapping[str, Any] | None:
        """The workload's Workload object as the API server has it now, None when there is none of its UID."""
        meta = wl.workload.metadata
        try:
            found: Any = await self.stored.api.get_object(resources.WORKLOADS, namespace=meta.namespace, name=meta.name)
        except kube_errors.NotFoundError:
            return None
        uid = (found.get("metadata") or {}).get("uid")
        return found if not meta.uid or uid == meta.uid else None

    async def _sync_standalone(self, key: str, wl: WorkloadState) -> None:
        """A Workload a user created: only its status is ours (the object and its spec are the user's, but for
        ``spec.active`` set false once when Kueue deactivates it, :meth:`_deactivate`).

        Kueue's status fields are server-side applied with the dispatcher's field manager;
        what the user writes there (a Finished condition, admission check states) is read
        back by the watcher. The object gone (404) is left to the watcher's deletion fact.
        One finished ``OwnerNotFound`` (a job's Workload made without its owner) loses Kueue's
        ``resource-in-use`` finalizer too, as Kueue's FinalizeOrphanedWorkload (pkg/workload/workload.go)
        takes it off.
        """
        meta = wl.workload.metadata
        ident: ObjectKey = ("Workload", meta.namespace, meta.name)
        self.view.checks_reported.pop(key, None)  # its status is the user's object's: not read back here
        try:
            stored = await self._deactivate(key, wl, ident) or self.stored.objects.get(ident)
        except kube_errors.NotFoundError:
            log.info("standalone_workload_not_in_cluster", workload=key)
            return
        # the log's generation is the object's as the watcher last read it: later than the server's last answer to
        # the dispatcher after a user's spec write (spec.active)
        generation = max(int(objects.meta(stored or {}).get("generation") or 0), meta.generation)
        wanted = status.workload_status(self.view.records.get(key), generation=generation)
        wanted = status.with_object_uids(wanted, self.stored.object_uid)
        wanted = status.not_before(wanted, created_ms(stored))
        if stored is None or _managed(stored, status.WORKLOAD_STATUS_FIELDS) != wanted:
            body = {
                "apiVersion": resources.WORKLOADS.api_version,
                "kind": "Workload",
                "metadata": {"name": meta.name, "namespace": meta.namespace},
                "status": wanted,
            }
            try:
                first = nomination_first((stored or {}).get("status"), wanted)
                if first is not None:
                    await self.stored.apply(resources.WORKLOADS, {**body, "status": first}, subresource="status")
                stored = self.stored.keep(
                    ident, await self.stored.apply(resources.WORKLOADS, body, subresource="status")
                )
            except kube_errors.NotFoundError:
                log.info("standalone_workload_not_in_cluster", workload=key)
                return
        orphaned = wl.finished is not None and wl.finished.reason == workloads.OWNER_NOT_FOUND_REASON
        if orphaned and RESOURCE_IN_USE_FINALIZER in _finalizers(stored):
            await self.stored.let_go(meta.namespace, meta.name, deleting=True)
            self.stored.objects.pop(ident, None)  # its metadata changed: read afresh on its next write

    async def _sync_failed(self, wl: WorkloadState, *, seq: int, err: kube_errors.ApiError) -> None:
        self.stored.failures += 1
        log.warning("workload_sync_failed", workload=wl.workload.key, status=err.status, error=str(err))
        failed = types.DispatchFailed(
            workload=wl.ref,
            decision_seq=seq,
            action=SYNC_WORKLOAD,
            status=err.status,
            reason=err.reason,
            message=str(err),
        )
        publish = self.bus.publish(
            subjects.message(
                failed,
                subject=subjects.dispatch_subject(wl.ref, self.cluster),
                msg_id=f"disp:{self.cluster}:{seq}:{SYNC_WORKLOAD}",
            )
        )
        if self.record is not None:
            self.record(publish)
        else:
            await publish


def _user_spec(wl: WorkloadState) -> tuple[Any, ...]:
    """The spec fields of a job's Workload object that its user writes (and the watcher reads back onto the log):
    ``spec.active``, and ``spec.priority`` when the watcher marked it the user's (models.OWN_PRIORITY_ANNOTATION)."""
    spec, annotations = wl.workload.spec, wl.workload.metadata.annotations
    return spec.active, spec.priority if models.OWN_PRIORITY_ANNOTATION in annotations else None


def created_ms(stored: Mapping[str, Any] | None) -> int:
    """The ``metadata.creationTimestamp`` of an object as the server returned it (ms since the epoch; 0 for none,
    or one that does not parse)."""
    value = ((stored or {}).get("metadata") or {}).get("creationTimestamp")
    try:
        return manifests.parse_time_ms(value)
    except manifests.ManifestError:
        return 0


def nomination_first(stored_status: Any, wanted: Mapping[str, Any]) -> dict[str, Any] | None:
    """The status to write before ``wanted`` when ``wanted`` sets ``clusterName`` on a Workload whose stored status
    has none and does not nominate that worker: ``wanted`` with the worker in ``nominatedClusterNames`` and no
    ``clusterName`` (Kueue's webhook, validateClusterNameUpdate, takes a clusterName only from the nominated
    ones, and a dispatcher that folded the nomination and the choice together would write them at once,
    refused for ever). None when ``wanted`` may be written as it is."""
    cluster = wanted.get("clusterName")
    current = stored_status if isinstance(stored_status, Mapping) else {}
    if cluster is None or current.get("clusterName") is not None:
        return None
    if cluster in (current.get("nominatedClusterNames") or []):
        return None
    first = {key: value for key, value in wanted.items() if key != "clusterName"}
    first["nominatedClusterNames"] = [cluster]
    return first


def admission_cleared_first(
    stored_status: Any, wanted: Mapping[str, Any], *, gates: Mapping[str, bool]
) -> dict[str, Any] | None:
    """The status to write before ``wanted`` when ``wanted`` holds another admission than the stored status: a
    workload evicted and admitted again (other flavors, another count) between two of the dispatcher's writes.
    Kueue's Workload webhook lets an admission be set or cleared, never changed in place (validateAdmissionUpdate),
    and Kueue's own controllers write the two steps apart (the eviction clears the reservation before the next
    cycle admits); written at once the change was refused and the object kept the old admission. The first write
    is ``wanted`` without ``admission``, its QuotaReserved and Admitted conditions False (with the Evicted
    condition's reason and message when there is one, else ``Pending``). None when ``wanted`` may be written as
    it is. ``gates``: the Configuration's feature gates (TopologyAwareScheduling lets topology assignments be set)."""
    current = stored_status if isinstance(stored_status, Mapping) else {}
    old, new = current.get("admission"), wanted.get("admission")
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return None
    if not workload_webhook.admission_change_refused(new, old, gates=gates):
        return None
    conditions = [c for c in wanted.get("conditions") or [] if isinstance(c, Mapping)]
    evicted = next((c for c in conditions if c.get("type") == "Evicted" and c.get("status") == "True"), None)
    reason = str(evicted.get("reason")) if evicted is not None else "Pending"
    message = str(evicted.get("message") or "") if evicted is not None else ""
    cleared = [
        {**c, "status": "False", "reason": reason, "message": message}
        if c.get("type") in ("QuotaReserved", "Admitted") and c.get("status") == "True"
        else dict(c)
        for c in conditions
    ]
    first = {key: value for key, value in wanted.items() if key != "admission"}
    first["conditions"] = cleared
    return first


def _is_finished(workload_status: Any) -> bool:
    """Whether a Workload status (as written or stored) has the Finished condition True."""
    return _has_condition(workload_status, "Finished")


def _has_condition(workload_status: Any, kind: str) -> bool:
    """Whether a Workload status (as written or stored) has condition ``kind`` True."""
    conditions = (workload_status or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions if isinstance(c, dict))


def _replaced(wl: WorkloadState | None) -> bool:
    """The workload is an elastic slice finished ``WorkloadSliceReplaced``."""
    return wl is not None and wl.finished is not None and wl.finished.reason == slices.REPLACED_REASON


class QueueStatusSync:
    """Writes the status of every ClusterQueue, LocalQueue and Cohort whose status changed: counts, usage, the
    ``Active`` condition and, with fair sharing on, the weighted share.

    Queue status is an aggregate, the least urgent of the dispatcher's writes
    (:attr:`~kueue_es.services.dispatcher.write_budget.WriteClass.QUEUES`): it is written
    apart from the decisions' batches (:meth:`run`), through a
    :class:`~kueue_es.services.dispatcher.write_budget.Coalescer`, a dirty set keyed by
    object: each object is written at most once per ``interval`` seconds, with the state
    the fold has when its turn comes, and no write of it waits in a queue.

    ``clock`` gives the time (ms since the epoch) a condition that changes status is
    stamped with; ``monotonic`` the seconds the interval is measured in.
    """

    def __init__(
        self,
        *,
        view: core.DispatchState,
        stored: StoredObjects,
        interval: float = 1.0,
        clock: Callable[[], int] = wall_clock_ms,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.view, self.stored, self.clock, self.monotonic = view, stored, clock, monotonic
        self.dirty: Coalescer[ObjectKey] = Coalescer(interval=interval)
        self.writes = 0  # queue status writes so far
        self.writing = 0  # queue status writes under way (popped from the dirty set, not yet answered)
        self._feeding_cache: dict[str, list[tuple[str, str]]] = {}
        self._feeding_at = -1
        self._afs_tick = -1  # the sampling tick the LocalQueues' fair sharing status was last marked for

    def pending(self) -> int:
        """How many queues' status is still to be written (changed, and not yet written or its write not
        yet answered: the last write of a backlog is under way while the dirty sets are already empty)."""
        return len(self.dirty) + len(self.view.dirty_queues) + self.writing

    def collect(self) -> None:
        """Move the queues the fold marked dirty into the dirty set (with the Cohorts above a dirty
        ClusterQueue while fair sharing is on: their weighted share follows their ClusterQueues' usage)."""
        taken = self.view.take_dirty_queues()
        self._afs_sample()
        if not taken:
            return
        state = self.view.cluster
        if state.configuration.fair_sharing is not None:
            taken = _with_cohorts_above(state, taken)
        self.dirty.mark(taken, self.monotonic())

    def _afs_sample(self) -> None:
        """At each tick of admission fair sharing's ``usageSamplingInterval``, mark the LocalQueues that have a
        usage ledger dirty: their ``consumedResources`` decay between the fold's changes, as Kueue's LocalQueue
        controller samples them (:func:`status.local_queue_fair_sharing`)."""
        state = self.view.cluster
        interval = status.afs_sampling_ms(state)
        if interval <= 0 or not state.afs_ledgers:
            return
        tick = self.clock() // interval
        if tick == self._afs_tick:
            return
        self._afs_tick = tick
        marked = [("LocalQueue", ns, name) for ns, name in state.afs_ledgers if (ns, name) in state.local_queues]
        self.dirty.mark(marked, self.monotonic())

    async def sync(self) -> None:
        """Write the status of every dirty queue that is due now and differs from what the server has (each
        at most once per interval; the others stay dirty)."""
        while True:
            self.collect()
            ident = self.dirty.pop_due(self.monotonic())
            if ident is None:
                return
            self.writing += 1
            try:
                await self._sync_one(ident)
            finally:
                self.writing -= 1

    def _feeding(self) -> dict[str, list[tuple[str, str]]]:
        """The LocalQueues of each ClusterQueue, scanned once for the ClusterQueues written while nothing is
        folded in between (a scan of every LocalQueue per ClusterQueue would be slow with many of both)."""
        state = self.view.cluster
        if self._feeding_at != state.last_seq:
            self._feeding_cache = status.local_queues_by_cluster_queue(state)
            self._feeding_at = state.last_seq
        return self._feeding_cache

    async def run(self, *, ready: Callable[[], bool], poll: float = 0.05) -> None:
        """Write queue status whenever some is due, while ``ready()`` (cancel to stop); ``poll``: seconds
        between looks at the fold's dirty queues when nothing is due."""
        while True:
            if ready():
                await self.sync()
                wait = self.dirty.seconds_until_due(self.monotonic())
                await asyncio.sleep(poll if wait is None else max(min(wait, poll), 0.001))
            else:
                await asyncio.sleep(poll)

    async def _sync_one(self, ident: ObjectKey) -> None:
        """Write the status of queue ``ident`` as the fold has it now, unless the server has it already; for a
        ResourceFlavor, AdmissionCheck or Topology, keep its ``resource-in-use`` finalizer (:meth:`_keep_held`)."""
        state = self.view.cluster
        kind, namespace, name = ident
        if kind in HELD_REFS:
            await self._keep_held(ident)
            if not (kind == "AdmissionCheck" and name in state.multikueue.checks):
                return
        fields: tuple[str, ...] = status.QUEUE_STATUS_FIELDS
        if kind == "ClusterQueue" and name in state.cluster_queues:
            ref, wanted = resources.CLUSTER_QUEUES, status.cluster_queue_status(state, name, feeding=self._feeding())
            generation = state.cluster_queues[name].metadata.generation
        elif kind == "LocalQueue" and (namespace, name) in state.local_queues:
            stored_fair = ((self.stored.objects.get(ident) or {}).get("status") or {}).get("fairSharing")
            wanted = status.local_queue_status(
                state, namespace, name, previous_fair_sharing=stored_fair, now_ms=self.clock()
            )
            ref = resources.LOCAL_QUEUES
            generation = state.local_queues[(namespace, name)].metadata.generation
        elif kind == "Cohort" and name in state.cohorts:
            ref, wanted = resources.COHORTS, status.cohort_status(state, name)
            generation, fields = state.cohorts[name].metadata.generation, status.COHORT_STATUS_FIELDS
        elif (
            kind == "MultiKueueCluster" and name in state.multikueue.clusters and name in state.multikueue.connectivity
        ):
            ref, wanted, fields = resources.MULTIKUEUE_CLUSTERS, {}, ("conditions",)
            generation = state.multikueue.clusters[name].metadata.generation
        elif kind == "AdmissionCheck" and name in state.multikueue.checks:
            # MultiKueue's checks: kueue-es is their controller, the Active condition is written here
            ref, wanted, fields = resources.ADMISSION_CHECKS, {}, ("conditions",)
            generation = state.multikueue.checks[name].metadata.generation
        else:
            self.stored.objects.pop(ident, None)  # deleted, or a queue no object names
            self.dirty.forget(ident)
            return
        stored = self.stored.objects.get(ident)
        previous = _active_condition(stored)
        generation = max(generation, int(objects.meta(stored).get("generation") or 0) if stored else 0)
        condition = status.active_condition(
            state, kind, namespace, name, previous=previous, generation=generation, now_ms=self.clock()
        )
        wanted = {"conditions": [condition], **wanted}
        if ident in self.stored.absent:
            return
        if stored is None or _managed(stored, fields) != wanted:
            await self._write(ident, ref, wanted)
        if kind == "ClusterQueue":
            # Kueue's finalizer on every ClusterQueue; a terminating one (kubectl delete) lets go of it once no
            # workload reserves quota in it (clusterqueue_controller.go), and the API server deletes it
            terminating = state.cluster_queues[name].terminating
            if not terminating or not state.reserved.get(name):
                await self._hold(ident, ref, add=not terminating)

    async def _keep_held(self, ident: ObjectKey) -> None:
        """Kueue's finalizer on every ResourceFlavor, AdmissionCheck and Topology: put on while it is not
        terminating, taken off once it is terminating and nothing uses it (:func:`status.in_use_by`); then the
        API server deletes it. While it is used it stays as it was, usable (Kueue's cache keeps it)."""
        state = self.view.cluster
        kind, _, name = ident
        held = status.held_object(state, kind, name)
        if held is None:
            if not (kind == "AdmissionCheck" and name in state.multikueue.checks):
                self.stored.objects.pop(ident, None)  # deleted: nothing to keep
                self.dirty.forget(ident)
            return
        terminating = models.is_terminating(held.metadata)
        if terminating and status.in_use_by(state, kind, name):
            return  # taken off when what uses it changes (its ClusterQueue or ResourceFlavor events)
        await self._hold(ident, HELD_REFS[kind], add=not terminating)

    async def _hold(self, ident: ObjectKey, ref: resources.ResourceRef, *, add: bool) -> bool:
        """Put our ``resource-in-use`` finalizer on the object (``add``; Kueue's webhooks and controllers put it
        on every ClusterQueue, ResourceFlavor, AdmissionCheck and Topology) or take it off, keeping the others;
        returns whether the object is as wanted now. An object not read yet, or one to let go of, is read first. A write that lost a
        race with another writer of the object (409) is tried again on its next turn."""
        stored = self.stored.objects.get(ident)
        kind, namespace, name = ident
        if stored is None or not add:  # to let go, what the server has now: deletion changed its resourceVersion
            try:
                stored = self.stored.keep(
                    ident,
                    objects.as_stored(await self.stored.api.get_object(ref, namespace=namespace or None, name=name)),
                )
            except kube_errors.NotFoundError:
                return True
            except API_ERRORS as err:
                log.info("finalizer_read_retry", kind=kind, name=name, error=str(err))
                self.dirty.mark([ident], self.monotonic())
                return False
        meta = objects.meta(stored)
        present = _finalizers(stored)
        if (RESOURCE_IN_USE_FINALIZER in present) == add or (add and meta.get("deletionTimestamp")):
            return True
        kept = [f for f in present if f != RESOURCE_IN_USE_FINALIZER]
        finalizers = [*kept, RESOURCE_IN_USE_FINALIZER] if add else kept
        patch = {"metadata": {"finalizers": finalizers, "resourceVersion": meta.get("resourceVersion")}}
        await self.stored.limiter.acquire(WriteClass.QUEUES)
        try:
            self.stored.objects[ident] = objects.as_stored(
                await self.stored.api.patch_object(ref, namespace=namespace or None, name=name, patch=patch)
            )
        except kube_errors.NotFoundError:
            self.stored.objects.pop(ident, None)
            return True
        except API_ERRORS as err:
            log.info("finalizer_write_retry", kind=kind, name=name, error=str(err))
            with contextlib.suppress(*API_ERRORS):  # what the server has now, for the next try
                self.stored.objects[ident] = objects.as_stored(
                    await self.stored.api.get_object(ref, namespace=namespace or None, name=name)
                )
            self.dirty.mark([ident], self.monotonic())
            return False
        self.stored.writes += 1  # not a status write (``writes``)
        log.info("finalizer_" + ("added" if add else "removed"), kind=kind, name=name)
        return True

    async def _write(self, ident: ObjectKey, ref: resources.ResourceRef, wanted: dict[str, Any]) -> None:
        kind, namespace, name = ident
        metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
        body = {"apiVersion": ref.api_version, "kind": ref.kind, "metadata": metadata, "status": wanted}
        try:
            self.stored.objects[ident] = await self.stored.apply(
                ref, body, subresource="status", write_class=WriteClass.QUEUES
            )
        except kube_errors.NotFoundError:
            log.info("queue_not_in_cluster", kind=kind, namespace=namespace, name=name)
            self.stored.absent.add(ident)
        except API_ERRORS as err:
            if retryable(err):
                self.dirty.mark([ident], self.monotonic())
            self.stored.failures += 1
            log.warning("queue_status_failed", kind=kind, namespace=namespace, name=name, error=str(err))
        else:
            self.writes += 1
            self.dirty.written(ident, self.monotonic())


RESOURCE_IN_USE_FINALIZER = status.RESOURCE_IN_USE_FINALIZER

HELD_REFS = {
    "ResourceFlavor": resources.RESOURCE_FLAVORS,
    "AdmissionCheck": resources.ADMISSION_CHECKS,
    "Topology": resources.TOPOLOGIES,
}
"""The kinds whose finalizer alone the dispatcher keeps (no status of theirs is written; a MultiKueue
AdmissionCheck's is, besides), and where they are served."""


def _finalizers(obj: objects.KubeObject | None) -> list[str]:
    return [str(f) for f in objects.meta(obj or {}).get("finalizers") or []]


def _with_cohorts_above(state: ClusterState, dirty: list[ObjectKey]) -> list[ObjectKey]:
    """``dirty`` and, after it, the Cohort objects above each dirty ClusterQueue (each once)."""
    out = dict.fromkeys(dirty)
    for kind, _, name in dirty:
        cq = state.cluster_queues.get(name) if kind == "ClusterQueue" else None
        if cq is not None and cq.spec.cohort_name:
            out.update(dict.fromkeys(("Cohort", "", c) for c in status.cohort_ancestors(state, cq.spec.cohort_name)))
    return list(out)


def _active_condition(stored: objects.StoredObject | None) -> Any:
    """The ``Active`` condition the server has on a stored queue, or None."""
    conditions = ((stored or {}).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if isinstance(c, dict) and c.get("type") == "Active"), None)


_RESET_PREFIX = status.RESET_MESSAGE.split("{", 1)[0]


def keep_controller_checks(
    wanted: list[dict[str, Any]],
    server: list[dict[str, Any]],
    *,
    own: Iterable[str] = (),
    reset: Mapping[str, tuple[str, str, frozenset[str]]] | None = None,
) -> list[dict[str, Any]]:
    """The ``status.admissionChecks`` to write: ``wanted`` (the log's view, in its order), with the
    server's entry kept wherever a check controller wrote it.

    The dispatcher's own entries are Pending: added (no message) or reset after an
    eviction (Kueue's "Reset to Pending after eviction" message). Any other wanted entry
    mirrors a controller's report, which the server holds as new or newer: the server's
    wins. An added entry yields to a server entry that differs (the controller answered
    before the dispatcher wrote again); a reset wins unless the server's
    lastTransitionTime is later (the controller answered after the reset), and always over
    the very report the eviction reset (``reset``: :func:`status.reset_reports`), whatever
    time that report carries (one written by hand with a time to come stayed Retry). Entries are
    dicts as the API has them (name, state, lastTransitionTime RFC 3339, message, ...).
    The checks named in ``own`` are kueue-es's to decide (MultiKueue's): the log's entry wins.
    """
    replaced = reset or {}
    on_server = {str(entry.get("name")): entry for entry in server if isinstance(entry, dict)}
    mine = set(own)
    merged = []
    for entry in wanted:
        theirs = on_server.get(str(entry.get("name")))
        if str(entry.get("name")) in mine:
            merged.append(entry)
            continue
        message = str(entry.get("message") or "")
        if theirs is None or theirs == entry:
            merged.append(entry)
        elif entry.get("state") != "Pending" or not (message == "" or message.startswith(_RESET_PREFIX)):
            merged.append(theirs)  # a controller's report: the server has it at least as new
        elif message == "":
            merged.append(theirs)  # added Pending, and the controller has answered since
        elif _is_report(theirs, replaced.get(str(entry.get("name")))):
            merged.append(entry)  # the report the eviction reset, still on the server
        elif _time_ms(theirs.get("lastTransitionTime")) > _time_ms(entry.get("lastTransitionTime")):
            merged.append(theirs)  # reset after an eviction, and the controller has answered since
        else:
            merged.append(entry)
    return merged


def _is_report(entry: dict[str, Any], report: tuple[str, str, frozenset[str]] | None) -> bool:
    """Whether the server's ``entry`` is ``report`` (state, message, the times the log saw it with)."""
    if report is None:
        return False
    state, message, times = report
    return (
        entry.get("state") == state
        and str(entry.get("message") or "") == message
        and str(entry.get("lastTransitionTime") or "") in times
    )


def _strays(server: list[dict[str, Any]], checks: list[dict[str, Any]]) -> list[str]:
    """The names of the entries in ``server`` (``status.admissionChecks`` as read) that ``checks`` (the list to
    write) does not have."""
    keep = {str(entry.get("name")) for entry in checks}
    return [
        str(entry.get("name")) for entry in server if isinstance(entry, dict) and str(entry.get("name")) not in keep
    ]


def _time_ms(value: Any) -> int:
    try:
        return manifests.parse_time_ms(value)
    except manifests.ManifestError:
        return 0


def _managed(obj: objects.StoredObject, fields: tuple[str, ...]) -> dict[str, Any]:
    """The part of ``obj``'s status the dispatcher writes."""
    current = obj.get("status") or {}
    return {key: current[key] for key in fields if key in current}


def _contains(stored: Any, wanted: Any) -> bool:
    """Whether every field of ``wanted`` has that value in ``stored`` (maps compared by key, the rest whole)."""
    if isinstance(wanted, dict):
        return isinstance(stored, dict) and all(k in stored and _contains(stored[k], v) for k, v in wanted.items())
    return bool(stored == wanted)


def _own_apply_entry(entry: Any, manager: str) -> bool:
    """Whether a ``metadata.managedFields`` entry is ``manager``'s apply of the object itself (not a subresource)."""
    return (
        isinstance(entry, dict)
        and entry.get("manager") == manager
        and entry.get("operation") == "Apply"
        and not entry.get("subresource")
    )


def _applies_active(stored: objects.StoredObject, manager: str) -> bool:
    """Whether ``manager``'s apply entry of the Workload object owns ``spec.active`` (an earlier dispatcher's)."""
    return any(
        _own_apply_entry(entry, manager) and "f:active" in ((entry.get("fieldsV1") or {}).get("f:spec") or {})
        for entry in _managed_fields(stored)
    )


def _managed_fields(stored: objects.StoredObject) -> list[Any]:
    """The object's ``metadata.managedFields`` entries ([] when it has none or they are not a list)."""
    entries: Any = objects.meta(stored).get("managedFields")
    return list(entries) if isinstance(entries, list) else []


def _without_applied_active(entries: list[Any], manager: str) -> list[Any]:
    """``entries`` (managedFields) with ``spec.active`` taken out of ``manager``'s apply entry."""
    out = []
    for entry in entries:
        if _own_apply_entry(entry, manager):
            fields = dict(entry.get("fieldsV1") or {})
            spec = {k: v for k, v in (fields.pop("f:spec", None) or {}).items() if k != "f:active"}
            if spec:  # an empty one would own the whole spec (a FieldsV1 leaf)
                fields["f:spec"] = spec
            entry = {**entry, "fieldsV1": fields}
        out.append(entry)
    return out


def _reference_taken_off(stored: objects.StoredObject, desired: RawObject) -> bool:
    """Whether the Workload object as the server returned it (``stored``) is a job's left without owner references
    (:func:`kueue_es.jobframework.workloads.is_orphaned`) while the one to write (``desired``) names an owner: a
    reference someone else took off since it was written."""
    return workloads.is_orphaned(stored) and bool(desired["metadata"].get("ownerReferences"))


def _owner_refs(obj: objects.StoredObject | RawObject | None) -> list[Any]:
    """The object's ``metadata.ownerReferences`` (the mappings among them)."""
    meta: Any = (obj or {}).get("metadata") or {}
    return [ref for ref in meta.get("ownerReferences") or [] if isinstance(ref, dict)]


def _uid_owner(obj: objects.StoredObject | RawObject) -> list[Any]:
    meta: Any = obj.get("metadata") or {}
    return [ref.get("uid") for ref in meta.get("ownerReferences") or []]


def _runnable_members(pods: Iterable[RawObject], group: str) -> list[RawObject]:
    """The pods of pod group ``group`` (:func:`~kueue_es.jobframework.pods.group_name`) neither Failed nor being
    deleted, by name."""
    members = sorted(
        (p for p in pods if pod_integration.group_name(p) == group),
        key=lambda p: str((p.get("metadata") or {}).get("name") or ""),
    )
    return [
        p
        for p in members
        if (p.get("status") or {}).get("phase") != "Failed" and not (p.get("metadata") or {}).get("deletionTimestamp")
    ]


def _role(pod: RawObject) -> str:
    """A group member's role hash (its pod set's name), "" without one."""
    return str(((pod.get("metadata") or {}).get("annotations") or {}).get(pod_integration.ROLE_HASH_ANNOTATION) or "")
