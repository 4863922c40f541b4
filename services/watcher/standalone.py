"""Workload objects a user created: Kueue admits them as they are, with no job behind them.

Why this module exists: Kueue's unit of admission is the Workload, and a user (or a
controller kueue-es has no integration for) may create one directly, with
``spec.queueName`` and pod sets; Kueue's scheduler admits it like any other. With no
job, the user (or that controller) plays the job's part on the Workload object
itself, as Kueue's own tests do (test/util: FinishEvictionForWorkloads,
FinishWorkloads, SetPodsReady):

- the workload finished: a ``Finished`` condition with status True
  (-> WorkloadFinished);
- an eviction completed: after the dispatcher wrote ``Evicted=True``, the
  ``QuotaReserved`` condition set to False (-> WorkloadStopped, once per eviction;
  the admitter then releases the quota, SEMANTICS §7.8);
- an eviction: ``Evicted=True`` written while it holds quota (-> WorkloadEvictionObserved, once per
  condition; the admitter evicts it with that condition, and it keeps its quota until the user clears
  QuotaReserved, as Kueue's workload controller leaves a jobless workload's eviction to its user);
- pods ready: a ``PodsReady`` condition (-> WorkloadPodsReady when it changes);
- admission check states in ``status.admissionChecks`` (the job workloads' path,
  :meth:`ProgressReporter.check_entries`);
- pods whose quota is no longer needed: ``status.reclaimablePods`` (-> WorkloadReclaimablePods
  when it changes; Kueue's Dynamic Reclaim for a custom integration).

A Workload object is standalone when it has no owner reference: those the
dispatcher writes for jobs always have one (the job). One a job names as its
prebuilt Workload, and may adopt, is that job's even before the dispatcher wrote
the owner reference (:mod:`kueue_es.services.watcher.prebuilt_tracking`).

Kueue's scheduler counts and checks a standalone Workload's pod sets as any other's: with the
RuntimeClass overheads and the LimitRange defaults of its namespace applied, and leaves one
whose requests break those LimitRanges pending, ``QuotaReserved=False`` reason ``Misconfigured``,
"resources didn't satisfy LimitRange constraints: ..." (resources.go AdjustResources,
ValidateAdmissibility). The watcher holds the LimitRanges and RuntimeClasses, so it puts what they
do into the WorkloadObserved it publishes (adjusted requests, the pod set's ``misconfigured``:
:func:`kueue_es.services.watcher.convert.workload_fact`), and publishes the workloads still
pending again when a LimitRange of their namespace or a RuntimeClass changes
(:meth:`StandaloneTracker.inputs_changed`), as Kueue's workload controller requeues the pending
workloads then (workload_controller.go resourceUpdatesHandler): one created or removed later
changes the outcome.

One with no owner reference but a job's ``kueue.x-k8s.io/job-uid`` label is a
job's Workload whose owner is gone: Kueue's workload controller finishes it
``OwnerNotFound`` (workload_controller.go Reconcile, isOrphanedWorkload; workload.go
FinalizeOrphanedWorkload; FinishOrphanedWorkloads, on by default) and never admits it
again. When the log holds it as a job's workload (the job deleted with
``--cascade=orphan``) the job side finishes it
(:meth:`~kueue_es.services.watcher.job_tracking.JobTracker.workload_object_orphaned`);
any other such object -- made by hand (``kubectl apply``), or left while no watcher
ran -- is published here like a standalone one, and finished ``OwnerNotFound`` at once
(:meth:`StandaloneTracker.stands_alone`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import Any, cast

import msgspec
import structlog

from kueue_es.events import codec, manifests, types
from kueue_es.jobframework import workloads
from kueue_es.scheduling import concurrent_admission as ca
from kueue_es.services.kube import objects
from kueue_es.services.watcher import convert
from kueue_es.services.watcher.inputs import ConversionInputs
from kueue_es.services.watcher.kinds import Key
from kueue_es.services.watcher.publishing import Publisher, log_rejection
from kueue_es.services.watcher.reporting import ProgressReporter

log = structlog.get_logger(__name__)

#: Kueue's Finished reasons that are no success (workload_types.go WorkloadFinishedReason*, reconciler.go
#: FailedToStart); any other reason a user writes counts as one.
_NOT_SUCCEEDED = frozenset({"Failed", "FailedToStart", "OutOfSync", workloads.OWNER_NOT_FOUND_REASON})

#: Reported by the watcher for a standalone workload's PodsReady condition (SEMANTICS-ADVANCED C.2).
_READY_REASONS = {True: "Started", False: "WaitForStart"}


def is_standalone(obj: Mapping[str, Any]) -> bool:
    """Whether a Workload object stands alone: no owner reference (a job's Workload always has one) and no
    ``kueue.x-k8s.io/job-uid`` label (one with the label is a job's Workload that outlived its job, orphaned:
    :func:`kueue_es.jobframework.workloads.is_orphaned`, never admitted again); or one whose owners are all
    kueue.x-k8s.io Workloads: a ConcurrentAdmission variant (:mod:`kueue_es.scheduling.concurrent_admission`),
    whose parent's controller plays the job's part on it."""
    meta = obj.get("metadata") or {}
    if meta.get("ownerReferences") and all(
        ca.is_variant({"metadata": {"ownerReferences": [ref]}}) for ref in meta["ownerReferences"]
    ):
        return True  # a ConcurrentAdmission variant: Kueue admits it as it is, its parent is no job
    return not meta.get("ownerReferences") and not workloads.is_orphaned(obj)


class StandaloneTracker:
    """Publishes standalone Workload objects, their deletion, and what their user reports on them.

    ``clock``: the time now in ms since the epoch, for what has no time of its own. ``finish_orphans``: the
    feature gate FinishOrphanedWorkloads (:func:`kueue_es.jobframework.workloads.finish_orphans`); off, a
    Workload with a job's UID label and no owner is not finished ``OwnerNotFound`` but queued and admitted as
    any standalone one, as Kueue's workload controller then does not take it for orphaned
    (workload_controller.go isOrphanedWorkload). ``inputs``: the RuntimeClasses and LimitRanges the watcher
    keeps (:meth:`ConversionInputs.pod_inputs`); None reads none.
    """

    def __init__(
        self,
        *,
        publisher: Publisher,
        reporter: ProgressReporter,
        clock: Callable[[], int],
        finish_orphans: bool = True,
        inputs: ConversionInputs | None = None,
    ) -> None:
        self.publisher, self.reporter, self.clock = publisher, reporter, clock
        self.finish_orphans = finish_orphans
        self.inputs = inputs
        # the standalone Workload objects as last seen, to check again when a LimitRange or RuntimeClass changes
        self.objects: dict[Key, objects.KubeObject] = {}
        self.finished: set[Key] = set()  # reported WorkloadFinished (a workload finishes once)
        # PodsReady last reported per workload: (status, reason, lastTransitionTime). A new transition time is
        # a new report (the pods of a new admission ready again); the dispatcher echoes the same one.
        self.pods_ready: dict[Key, tuple[bool, str, str]] = {}

    async def resynced(
        self,
        listed: list[objects.KubeObject],
        *,
        version: str,
        claimed: Callable[[objects.KubeObject], bool] = lambda obj: False,
    ) -> None:
        """A fresh list of Workloads: standalone ones the log holds and the list misses are deleted; those a job
        adopts (``claimed``: its prebuilt Workload, :mod:`~kueue_es.services.watcher.prebuilt_tracking`) are
        not published here."""
        live = {_key(obj) for obj in listed if self.stands_alone(obj)}
        for key in sorted(self.standalone_known() - live):
            await self.publisher.delete_workload(key, version=version)
        self.objects = {}
        for obj in listed:
            if self.stands_alone(obj) and not claimed(obj):
                await self.changed("ADDED", obj)

    def stands_alone(self, obj: objects.KubeObject) -> bool:
        """Whether this tracker publishes Workload object ``obj``: a standalone one (:func:`is_standalone`), or
        one without owner references but with the ``kueue.x-k8s.io/job-uid`` label
        (:func:`kueue_es.jobframework.workloads.is_orphaned`) the log does not hold as a job's workload (made so
        by hand: it is finished ``OwnerNotFound``, :meth:`changed`)."""
        if is_standalone(obj):
            return True
        if not workloads.is_orphaned(cast(Mapping[str, Any], obj)):
            return False
        key = _key(obj)
        known = self.publisher.workloads.get(key)
        return not (known is not None and known.owner is not None and key in self.publisher.known["Workload"])

    def standalone_known(self) -> set[Key]:
        """The workloads the log holds that came from no job (their last fact had no owner)."""
        return {key for key in self.publisher.known["Workload"] if self.publisher.sources.get(key, "") == ""}

    async def changed(self, change: str, obj: objects.KubeObject) -> None:
        """One standalone Workload added, modified or deleted."""
        key, meta = _key(obj), objects.meta(obj)
        version = objects.resource_version(obj)
        if change == "DELETED":
            uid = str(meta.get("uid") or "")
            # the Msg-Id names the object's deletion: the dispatcher's when the retention policies deleted it (a
            # finished one), which has its time too, so it is stored once whoever tells first
            gone = workloads.object_gone_version(uid) if uid else version
            at_ms = self.clock() if key in self.finished else msgspec.UNSET
            await self.publisher.delete_workload(key, version=gone, uid=uid, at_ms=at_ms)
            self.finished.discard(key)
            self.objects.pop(key, None)
            return
        self.objects[key] = obj
        fact, adjusted = self._observed(obj)
        log_rejection(fact)
        # a fact the LimitRanges or RuntimeClasses changed is keyed by its content too: the same object
        # version checked against other ones is another fact, not a duplicate
        await self.publisher.publish(fact, version=f"{version}.{_digest(fact)}" if adjusted else version)
        if not isinstance(fact, types.WorkloadObserved):
            return
        ref = types.WorkloadRef(namespace=key[0], name=key[1], uid=fact.workload.metadata.uid)
        status = obj.get("status")
        status = status if isinstance(status, dict) else {}
        conditions = {c.get("type"): c for c in status.get("conditions") or [] if isinstance(c, dict)}
        if self.finish_orphans and workloads.is_orphaned(cast(Mapping[str, Any], obj)):
            await self._owner_not_found(key, ref, conditions.get("Finished"))
        await self.reporter.check_entries(ref, status, version=version)
        await self.reporter.evicted_by_others(ref, obj)
        await self._pods_ready(key, ref, conditions.get("PodsReady"), version=version)
        reclaimable = {
            str(entry.get("name")): count
            for entry in status.get("reclaimablePods") or []
            if isinstance(entry, dict) and isinstance(count := entry.get("count"), int) and not isinstance(count, bool)
        }
        await self.reporter.reclaimable_changed(ref, fact.workload, reclaimable, version=version)
        await self._stopped(key, ref, conditions)
        await self._finished(key, ref, conditions.get("Finished"))

    async def inputs_changed(self, namespace: str | None, *, trigger: str) -> None:
        """A LimitRange of ``namespace`` (None: of any namespace, or a RuntimeClass) was added, changed or
        deleted: each standalone workload it may concern that holds no quota is checked again and published
        when that changes its fact (``trigger`` names the change in the Msg-Id). Kueue requeues the pending
        workloads of the namespace with their requests adjusted again (workload_controller.go
        resourceUpdatesHandler); one holding quota keeps what it was admitted with (its pod sets cannot change
        while it holds quota: the fold keeps them) and is checked again when its object next changes."""
        for key, obj in sorted(self.objects.items()):
            if namespace is not None and key[0] != namespace:
                continue
            if _holds_quota(obj):
                continue
            fact, _ = self._observed(obj)
            if isinstance(fact, types.WorkloadObserved):
                await self.publisher.publish(fact, version=f"{objects.resource_version(obj)}~{trigger}")

    def _observed(self, obj: objects.KubeObject) -> tuple[types.Fact, bool]:
        """The fact of standalone Workload ``obj`` and whether the RuntimeClasses or LimitRanges changed it."""
        manifest = cast(dict[str, Any], obj)
        plain = convert.kueue_fact(manifest, now_ms=self.clock())
        if self.inputs is None or not isinstance(plain, types.WorkloadObserved):
            return plain, False
        plain = self._parent_marked(plain, manifest)
        runtime_classes, limit_ranges = self.inputs.pod_inputs(_key(obj)[0])
        fact = convert.adjusted(
            plain, manifest, now_ms=self.clock(), runtime_classes=runtime_classes, limit_ranges=limit_ranges
        )
        return fact, fact is not plain

    def _parent_marked(self, fact: types.WorkloadObserved, manifest: Mapping[str, Any]) -> types.WorkloadObserved:
        """``fact`` with Kueue's parent label :data:`~kueue_es.scheduling.concurrent_admission.PARENT_LABEL` when its
        LocalQueue's ClusterQueue has a concurrentAdmissionPolicy (the gate on) and it is no variant: Kueue's queue
        manager never queues such a Workload, labelled or not, so the admitter must not see it unlabelled in the
        moment before the controller labels the object."""
        assert self.inputs is not None
        wl = fact.workload
        if (
            ca.is_parent(wl)
            or ca.is_variant(manifest)
            or not self.inputs.ca_parent(wl.metadata.namespace, wl.spec.queue_name)
        ):
            return fact
        meta = msgspec.structs.replace(wl.metadata, labels={**wl.metadata.labels, ca.PARENT_LABEL: "true"})
        return msgspec.structs.replace(fact, workload=msgspec.structs.replace(wl, metadata=meta))

    async def _owner_not_found(self, key: Key, ref: types.WorkloadRef, condition: Mapping[str, Any] | None) -> None:
        """A job's Workload with no owner (:meth:`stands_alone`), not finished yet: WorkloadFinished
        ``OwnerNotFound``, "The workload's owner no longer exists", right after its WorkloadObserved, once (the
        Msg-Id of :meth:`_finished`, which then sees the condition the dispatcher writes as told). Kueue:
        workload_controller.go Reconcile finishes it at once (isOrphanedWorkload, workload.go
        FinalizeOrphanedWorkload); only a scheduling cycle run in between admits it first (its quota is
        released when it finishes)."""
        if key in self.finished or (condition is not None and condition.get("status") == "True"):
            return
        await self.publisher.emit(workloads.owner_not_found(ref, at_ms=self.clock()), version=f"finished.{ref.uid}")
        self.finished.add(key)
        log.info("workload_owner_not_found", workload=ref.key)

    async def _finished(self, key: Key, ref: types.WorkloadRef, condition: Mapping[str, Any] | None) -> None:
        if condition is None or condition.get("status") != "True" or key in self.finished:
            return
        reason = str(condition.get("reason") or "Succeeded")
        fact = types.WorkloadFinished(
            workload=ref,
            succeeded=reason not in _NOT_SUCCEEDED,
            reason=reason,
            message=str(condition.get("message") or ""),
            at_ms=self._time(condition),
        )
        await self.publisher.emit(fact, version=f"finished.{ref.uid}")
        self.finished.add(key)
        log.info("workload_finished", workload=ref.key, reason=reason)

    async def _stopped(self, key: Key, ref: types.WorkloadRef, conditions: Mapping[Any, Any]) -> None:
        """WorkloadStopped once the user cleared QuotaReserved of a workload the dispatcher evicted."""
        evicted, reserved = conditions.get("Evicted"), conditions.get("QuotaReserved")
        if evicted is None or evicted.get("status") != "True" or reserved is None or reserved.get("status") != "False":
            return
        # once per eviction; no ":" in a Msg-Id version (ProgressReporter.learn splits on the last one)
        since = str(evicted.get("lastTransitionTime") or "").replace(":", "")
        version = f"evicted-{since}.{evicted.get('reason', '')}"
        if self.reporter.stopped.get(key) == version:
            return
        stopped = types.WorkloadStopped(workload=ref, reason=str(evicted.get("reason") or ""), at_ms=self.clock())
        await self.publisher.emit(stopped, version=version)
        self.reporter.stopped[key] = version
        log.info("workload_stopped", workload=ref.key, reason=stopped.reason, version=version)

    async def _pods_ready(
        self, key: Key, ref: types.WorkloadRef, condition: Mapping[str, Any] | None, *, version: str
    ) -> None:
        """WorkloadPodsReady for each new PodsReady transition the user writes (see ``pods_ready``)."""
        if condition is None:
            return
        ready = condition.get("status") == "True"
        reason = str(condition.get("reason") or _READY_REASONS[ready])
        seen = (ready, reason, str(condition.get("lastTransitionTime") or ""))
        if self.pods_ready.get(key) == seen:
            return
        if key not in self.pods_ready and self.reporter.pods_ready.get(key) == (ready, reason):
            self.pods_ready[key] = seen  # already on the log (learnt at start-up)
            return
        fact = types.WorkloadPodsReady(workload=ref, ready=ready, reason=reason, at_ms=self._time(condition))
        await self.publisher.emit(fact, version=f"{version}.{reason}")
        self.pods_ready[key] = seen
        self.reporter.pods_ready[key] = (ready, reason)

    def _time(self, condition: Mapping[str, Any]) -> int:
        try:
            return manifests.parse_time_ms(condition.get("lastTransitionTime")) or self.clock()
        except manifests.ManifestError:
            return self.clock()


def _holds_quota(obj: objects.KubeObject) -> bool:
    """Whether a Workload object's ``QuotaReserved`` condition is True (as the dispatcher wrote it)."""
    status = cast(Mapping[str, Any], obj).get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    return any(
        isinstance(c, dict) and c.get("type") == "QuotaReserved" and c.get("status") == "True" for c in conditions or []
    )


def _digest(fact: types.Fact) -> str:
    return hashlib.sha256(codec.encode(fact)).hexdigest()[:8]


def _key(obj: objects.KubeObject) -> Key:
    meta = objects.meta(obj)
    return str(meta.get("namespace") or "default"), str(meta.get("name") or "")
