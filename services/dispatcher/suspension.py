"""A job's suspension follows its workload's admission, whoever changed it (Kueue's job reconciler, steps 7 and 8).

Why this module exists: the dispatcher starts a job when the log admits its workload and stops it when the
log evicts it; nothing else wrote a job. A user could therefore ``kubectl patch job J -p
'{"spec":{"suspend":false}}'`` a pending job and run it with no quota, or suspend an admitted one and leave
its quota held by nothing running. Kueue's reconciler (pkg/controller/jobframework/reconciler.go
ReconcileGenericJob) puts both back:

- step 8, a job running while its workload is not admitted (pending, or holding a reservation still waiting
  for its checks): ``stopJob(StopReasonNotAdmitted, "Not admitted by cluster queue")``, except a job whose
  workload slices are enabled (elastic jobs run on, their new pods gated);
- step 7, a job suspended while its workload is admitted (and not evicted): ``startJob``, as at admission,
  with its ``Started`` Event again (a ConcurrentAdmission parent's job: while a variant of it is admitted, with that
  variant's admission; step 8 leaves it alone while a variant holds quota); also a job that adopts its prebuilt Workload admitted before it came
  (:meth:`Suspension.adopted`; pods that do: ungated);
- a job whose prebuilt Workload was finished ``OutOfSync`` has no workload: stopped if it runs
  (handleJobWithNoWorkload, :meth:`Suspension.finished`); so are pods whose prebuilt Workload was deleted
  (:meth:`Suspension.workload_deleted`): those that run are deleted, "missing workload".

- a job whose controller chain reaches a job Kueue manages (a JobSet's Job, made by hand running) runs while
  that ancestor's workload is missing or not admitted: suspended, with the Event ``Suspended`` "Kueue managed
  child job suspended" on it (ReconcileGenericJob's branch for a job that is not top-level,
  shouldSuspendChildJob; :meth:`Suspension.child_observed`, :func:`core.child_to_suspend`). The watcher's
  ChildJobObserved says the child runs; the decision is the fold's at that fact, checked again with the child
  as the API server has it before the write, which answers no decision either.

The watcher's PodsReady facts say when a job started or stopped without a decision (``progress.started``:
a job not suspended, a pod ungated): the first WorkloadPodsReady of a workload never admitted, and a
``WaitForStart`` after the job had started. Each such fact marks the workload; :meth:`Suspension.run` then
reads the job (the API server's, not the fact's) and writes only when it still disagrees with the fold, so a
fact that is stale by then writes nothing. These writes answer no decision: no dispatch result is recorded
(replay checks results against decisions), as with the Workload objects' status. A Pod's stop deletes it
(Pod.Stop): a pod running while its workload is not admitted is deleted; an admitted group's gated pods are
the ungater's. The deletion of a Pod workload's own Workload object deletes its pods too
(:meth:`Suspension.workload_deleted`, reconciler.go step 1.1).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import structlog

from kueue_es.events import slices, types
from kueue_es.jobframework import integrations, jobs, prebuilt
from kueue_es.jobframework import pods as pod_integration
from kueue_es.projections.cluster import WorkloadState
from kueue_es.services.dispatcher import core, kube_events
from kueue_es.services.dispatcher.job_writes import JOB_REF, POD_REF, JobWrites
from kueue_es.services.dispatcher.recording import Recording
from kueue_es.services.dispatcher.status import DELETED_STOP_MESSAGE
from kueue_es.services.dispatcher.write_budget import WriteClass
from kueue_es.services.kube import errors as kube_errors
from kueue_es.services.kube import objects, resources
from kueue_es.services.runtime import wall_clock_ms

log = structlog.get_logger(__name__)

NOT_ADMITTED_REASON = "NotAdmitted"
"""Kueue's StopReasonNotAdmitted (jobframework/reconciler.go)."""
NOT_ADMITTED_MESSAGE = "Not admitted by cluster queue"
"""The Stopped Event's message for it (reconciler.go step 8)."""
NO_MATCHING_REASON = "NoMatchingWorkload"
"""Kueue's StopReasonNoMatchingWorkload: the job of a prebuilt Workload finished OutOfSync has none."""
NO_MATCHING_MESSAGE = "missing workload"
"""The Stopped Event's message for it (reconciler.go handleJobWithNoWorkload)."""
CHILD_SUSPENDED_REASON = "Suspended"
"""Kueue's ReasonSuspended (jobframework/events.go): the Event on a managed job's child it suspends."""
CHILD_SUSPENDED_MESSAGE = "Kueue managed child job suspended"
"""Its message (reconciler.go ReconcileGenericJob)."""
REMEMBERED_REASONS = 200_000
"""Workloads whose last PodsReady reason is kept (the least recently reported forgotten first): one forgotten
misses a suspension by hand only if its job was suspended right then."""
STARTED_STATES = frozenset({"Started", "Recovered", "WaitForRecovery"})
"""PodsReady reasons of a job that had started (generatePodsReadyCondition): a WaitForStart after one of them
says the job was suspended again."""


class Suspension:
    """Puts a job's suspension back in line with its workload's admission (see the module).

    ``view``: the dispatcher's fold; ``jobs``: its job writes (rate-limited like every job write);
    ``recording``: where the jobs' Events go; ``gate``: whether this replica may write (its lease), None for
    always."""

    def __init__(
        self,
        *,
        view: core.DispatchState,
        jobs: JobWrites,
        recording: Recording,
        gate: Callable[[], bool] | None = None,
    ) -> None:
        self.view, self.jobs, self.recording, self.gate = view, jobs, recording, gate
        self.pod_deletions: dict[str, core.StopPods] = {}  # workload key -> its pods to delete (Workload deleted)
        # workload key -> its pods to stop (those that run) and the Stopped Event's message: not admitted, or its
        # prebuilt Workload finished OutOfSync or deleted (none left: "missing workload")
        self.pod_stops: dict[str, tuple[core.StopPods, str]] = {}
        self.pod_starts: dict[str, tuple[core.StartPods, int]] = {}  # workload key -> its pods' start, its sequence
        self.pods_deleted = 0
        self.due: dict[str, tuple[int, int]] = {}  # workload key -> (sequence, time in ms) of the fact that marked it
        # prebuilt workloads finished OutOfSync -> (sequence, time in ms) of that finish: their job is stopped
        self.unmatched: dict[str, tuple[int, int]] = {}
        self.reasons: dict[str, str] = {}  # workload key -> the PodsReady reason of its last fact (the newest kept)
        # children of managed jobs to suspend: (kind, namespace, name) -> (their ChildJobObserved, its sequence)
        self.children: dict[tuple[str, str, str], tuple[types.ChildJobObserved, int]] = {}
        self.children_suspended = 0
        self._wake = asyncio.Event()
        self._owners: dict[str, str] = {}  # workload key -> the UID of the single pod its deletion deletes
        self.stopped = 0  # jobs suspended because their workload was not admitted
        self.restarted = 0  # jobs unsuspended again because their workload is admitted

    def observed(self, event: types.WorkloadPodsReady) -> None:
        """The fold took the watcher's ``event``: mark its workload when the job may have started with no
        admission (any PodsReady fact of a workload not admitted: the watcher reports none before a start),
        or been suspended while admitted (``WaitForStart`` after a started reason, no eviction)."""
        key = event.workload.key
        previous = self.reasons.pop(key, None)
        self.reasons[key] = event.reason
        if len(self.reasons) > REMEMBERED_REASONS:
            del self.reasons[next(iter(self.reasons))]
        wl = self.view.cluster.workloads.get(key)
        if wl is None or wl.gone or wl.finished is not None:
            return
        owner = wl.workload.owner
        if owner is not None and owner.kind == "Pod" and not (wl.admitted and wl.reservation is not None):
            # a pod ungated by hand runs with no admission: Kueue's Pod.Stop (NotAdmitted) deletes it
            self._stop_pods_of(wl, reason=NOT_ADMITTED_REASON, seq=self.view.cluster.last_seq)
            return
        if not _job_of_its_own(wl):
            return
        if core.variant_holds_quota(self.view, wl):
            # a ConcurrentAdmission parent's job runs by its variants' decisions: only one suspended by hand while a
            # variant is admitted is looked at (started again, as for an admitted workload)
            if core.running_variant(self.view, wl) is None:
                return
            if event.reason != "WaitForStart" or previous not in STARTED_STATES:
                return
        elif wl.admitted and wl.reservation is not None:
            if wl.eviction is not None or event.reason != "WaitForStart" or previous not in STARTED_STATES:
                return
        self.due[key] = (self.view.cluster.last_seq, event.at_ms)
        self._wake.set()

    def child_observed(self, event: types.ChildJobObserved, *, seq: int) -> None:
        """The fold took ``event`` at ``seq``: a job of a managed ancestor runs. Mark it when the fold says it must
        not (:func:`core.child_to_suspend`: the ancestor's workload missing or not admitted); :meth:`run` then
        suspends it if it still runs and the ancestor's workload is still not admitted."""
        if not core.startable(event.api_version, event.kind) or event.kind == "Pod":
            return
        if core.child_to_suspend(self.view.cluster, event):
            self.children[(event.kind, event.namespace, event.name)] = (event, seq)
            self._wake.set()

    def adopted(self, key: str, *, seq: int) -> None:
        """The fold took, at ``seq``, a WorkloadObserved that gave workload ``key`` a new owner: when that is a job
        adopting its prebuilt Workload admitted already (:attr:`core.DispatchState.adopted_admitted`), mark it, so
        the job is started at once (reconciler.go step 7: a suspended job whose workload is admitted is started,
        as at admission). An admission that comes later starts it as any job's (:func:`core.plan`)."""
        if self.view.adopted_admitted.get(key) != seq:
            return  # not adopted admitted: the admission's plan starts it (a job running meanwhile: observed)
        wl = self.view.cluster.workloads.get(key)
        if wl is None or wl.gone or wl.finished is not None:
            return
        owner = wl.workload.owner
        if owner is not None and owner.kind == "Pod":  # its pods are ungated (pod_controller.go Run)
            start = core.start_of(self.view, wl)
            if isinstance(start, core.StartPods):
                self.pod_starts[key] = (start, seq)
                self._wake.set()
            return
        if not _job_of_its_own(wl):
            return
        self.due[key] = (seq, wall_clock_ms())
        self._wake.set()

    def replacement_admitted(self, key: str, *, seq: int) -> None:
        """The fold took, at ``seq``, the admission of workload ``key``: when it is an elastic job's replacement
        slice, mark it. Its admission's plan starts nothing (the job runs on, its new pods ungated), but a job
        whose earlier slice was replaced before its start was dispatched is still suspended: :meth:`check` then
        starts it with this slice's admission (reconciler.go step 7: a suspended job whose workload is admitted
        is started)."""
        wl = self.view.cluster.workloads.get(key)
        if wl is None or slices.replacement_for(wl.workload) is None or not _job_owned(wl):
            return
        self.due[key] = (seq, wall_clock_ms())
        self._wake.set()

    def finished(self, event: types.WorkloadFinished, *, seq: int) -> None:
        """The fold took ``event`` at ``seq``: a prebuilt Workload finished ``OutOfSync`` leaves its job with no
        workload, so a job of it that runs is stopped (reconciler.go handleJobWithNoWorkload: stopJob
        ``NoMatchingWorkload``, "missing workload"); the quota it ran on is released with the finish."""
        if event.reason != prebuilt.OUT_OF_SYNC_REASON:
            return
        wl = self.view.cluster.workloads.get(event.workload.key)
        if wl is None or not prebuilt.is_adopted(wl.workload):
            return
        if wl.workload.owner is not None and wl.workload.owner.kind == "Pod":  # Pod.Stop deletes those that run
            self._stop_pods_of(wl, reason=NO_MATCHING_REASON, seq=seq)
            return
        if not _job_of_its_own(wl):
            return
        self.unmatched[wl.key] = (seq, event.at_ms)
        self._wake.set()

    def workload_deleted(self, event: types.ObjectDeleted, wl: WorkloadState | None, *, seq: int) -> None:
        """Before the fold takes ``event`` (at ``seq``): when it is the deletion of the Workload object of a
        single Pod or a pod group (the watcher names the workload's own UID: ``kubectl delete workload``, not
        its pods going), mark its pods for deletion, as Kueue's reconciler stops a job whose Workload is being
        deleted and Pod.Stop deletes the pods (gated ones too: they would never be admitted). Not for a finished
        workload (deleted by hand, or by the retention policies): Kueue's reconciler only finalizes the job of a
        finished Workload, before it looks at its deletion.

        Any deletion of a workload also forgets its last PodsReady reason: the job's next workload (made again
        under the same key, with the job's UID) starts anew, so its first WaitForStart does not read as a job
        suspended by hand after it had started (which started it a second time beside its admission's start)."""
        if event.kind == "Workload":
            self.reasons.pop(f"{event.namespace}/{event.name}", None)
        if event.kind != "Workload" or wl is None or not event.uid or event.uid != wl.workload.metadata.uid:
            return
        if wl.finished is not None:
            return
        owner = wl.workload.owner
        if owner is None or owner.kind != "Pod":
            return
        if prebuilt.is_adopted(wl.workload):
            # a prebuilt Workload has no finalizer of Kueue's: it is gone, its pods have none (handleJobWithNoWorkload:
            # those that run are stopped, "missing workload"; the gated ones wait for a Workload of that name again)
            self._stop_pods_of(wl, reason=NO_MATCHING_REASON, seq=seq)
            return
        stop = core.stop_of(self.view, wl, wl.ref, reason=core.DELETED_REASON, seq=seq)
        if isinstance(stop, core.StopPods):
            self.pod_deletions[wl.key] = stop
            self._owners[wl.key] = owner.uid
            self._wake.set()

    def _stop_pods_of(self, wl: WorkloadState, *, reason: str, seq: int) -> None:
        """Mark the pods of Pod workload ``wl`` to be stopped for ``reason`` (those that run are deleted, each with
        Kueue's Stopped Event: Pod.Stop), as of ``seq``."""
        stop = core.stop_of(self.view, wl, wl.ref, reason=reason, seq=seq)
        if isinstance(stop, core.StopPods) and wl.workload.owner is not None:
            message = NOT_ADMITTED_MESSAGE if reason == NOT_ADMITTED_REASON else NO_MATCHING_MESSAGE
            self.pod_stops[wl.key] = (stop, message)
            self._owners[wl.key] = wl.workload.owner.uid
            self._wake.set()

    async def run(self, *, ready: Callable[[], bool]) -> None:
        """Check every marked workload's job, oldest mark first, while ``ready()`` (cancel to stop). A failed
        read or write is logged and left: the next fact about the workload marks it again."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            if not ready():
                await asyncio.sleep(0.05)
                self._wake.set()
                continue
            while self.pod_deletions:
                key = next(iter(self.pod_deletions))
                action = self.pod_deletions.pop(key)
                try:
                    await self._delete_pods(action, owner_uid=self._owners.pop(key, ""))
                except (kube_errors.ApiError, kube_errors.ConnectionFailedError) as err:
                    log.warning("pods_not_deleted", workload=key, error=str(err))
            while self.pod_stops:
                key = next(iter(self.pod_stops))
                action, message = self.pod_stops.pop(key)
                try:
                    await self._stop_pods(key, action, owner_uid=self._owners.pop(key, ""), message=message)
                except (kube_errors.ApiError, kube_errors.ConnectionFailedError) as err:
                    log.warning("pods_not_stopped", workload=key, error=str(err))
            while self.pod_starts:
                key = next(iter(self.pod_starts))
                start, seq = self.pod_starts.pop(key)
                try:
                    await self._start_pods(key, start, seq=seq)
                except (kube_errors.ApiError, kube_errors.ConnectionFailedError) as err:
                    log.warning("pods_not_started", workload=key, error=str(err))
            while self.unmatched:
                key = next(iter(self.unmatched))
                seq, at_ms = self.unmatched.pop(key)
                try:
                    await self._stop_unmatched(key, seq=seq, at_ms=at_ms)
                except (kube_errors.ApiError, kube_errors.ConnectionFailedError) as err:
                    log.warning("job_suspension_not_checked", workload=key, seq=seq, error=str(err))
            while self.children:
                child = next(iter(self.children))
                observed, seq = self.children.pop(child)
                try:
                    await self._suspend_child(observed, seq=seq)
                except (kube_errors.ApiError, kube_errors.ConnectionFailedError) as err:
                    log.warning("child_job_not_suspended", job=f"{child[0]} {child[1]}/{child[2]}", error=str(err))
            while self.due:
                key = next(iter(self.due))
                seq, at_ms = self.due.pop(key)
                try:
                    await self.check(key, seq=seq, at_ms=at_ms)
                except (kube_errors.ApiError, kube_errors.ConnectionFailedError) as err:
                    log.warning("job_suspension_not_checked", workload=key, seq=seq, error=str(err))

    async def check(self, key: str, *, seq: int, at_ms: int = 0) -> None:
        """Read workload ``key``'s job and start or stop it when its suspension disagrees with the fold
        (``seq``, ``at_ms``: the log sequence and time of the fact that marked it, which name the write in the
        dispatcher's log and its Event). Raises the API's errors (but 404: a job that is gone needs nothing)."""
        wl = self.view.cluster.workloads.get(key)
        if wl is None or wl.gone or wl.finished is not None or wl.deleted_seq or not _job_owned(wl):
            return
        if self.gate is not None and not self.gate():
            return
        if core.variant_holds_quota(self.view, wl):
            await self._check_parent(wl, seq=seq, at_ms=at_ms)
            return
        admitted = wl.admitted and wl.reservation is not None
        if not admitted and not _job_of_its_own(wl):
            return  # a replacement slice only ever starts a job still suspended (replacement_admitted)
        if admitted and wl.eviction is not None:
            return  # being stopped by its eviction
        if not admitted and wl.workload.metadata.annotations.get(slices.SLICE_NAME_ANNOTATION):
            return  # an elastic job runs on while a slice waits (reconciler.go: WorkloadSliceEnabled)
        found = await self._job(wl)
        if found is None:
            return
        # the fold ran on while the job was read: a workload finished, released or gone meanwhile is left alone
        if self.view.cluster.workloads.get(key) is not wl or wl.gone or wl.finished is not None or wl.deleted_seq:
            return
        if admitted != (wl.admitted and wl.reservation is not None) or core.variant_holds_quota(self.view, wl):
            return  # admitted or released meanwhile (or a variant of it): marked again by what changed it
        _, suspended = found
        if admitted and suspended and seq >= self.view.reserved_seq.get(key, 0):
            # (marked before this reservation, e.g. to stop a job running with none: its admission's plan starts
            # the job, so starting it here too started it twice)
            await self._start(wl, seq=seq, at_ms=at_ms)
        elif not admitted and not suspended:
            await self._stop(wl, seq=seq, at_ms=at_ms)

    async def _suspend_child(self, child: types.ChildJobObserved, *, seq: int) -> None:
        """Suspend ``child`` (its ChildJobObserved at ``seq``) as Kueue's reconciler does (``job.Suspend()``, then
        the Event ``Suspended`` on it) when, read now, it is the same object (UID), not being deleted, neither
        suspended nor finished, and the fold still says its ancestor's workload is not admitted (admitted
        meanwhile: left alone). Raises the API's errors (but 404: a child that is gone needs nothing)."""
        if self.gate is not None and not self.gate():
            return
        if not core.child_to_suspend(self.view.cluster, child):
            return
        integration = integrations.by_kind(child.kind) if child.kind != "Job" else None
        ref = JOB_REF if integration is None else resources.ref_for(integration.api_version, integration.kind)
        try:
            job = await self.jobs.api.get_object(ref, namespace=child.namespace, name=child.name)
        except kube_errors.NotFoundError:
            return
        meta = job.get("metadata") or {}
        if (child.uid and meta.get("uid", child.uid) != child.uid) or meta.get("deletionTimestamp"):
            return
        if integration is None:
            suspended = (job.get("spec") or {}).get("suspend") is True
            finished = jobs.finished_condition(job) is not None
        else:
            suspended = integrations.suspended(integration, job)
            finished = integration.finished(job) is not None
        if suspended or finished or not core.child_to_suspend(self.view.cluster, child):
            return  # (the fold ran on while the child was read)
        path = ("spec", "suspend") if integration is None else integration.suspend_path
        if path is None:
            return  # a kind run through its pods (core.startable keeps them out)
        patch: dict[str, Any] = {}
        integrations.set_at(patch, path, True)
        await self.jobs.limiter.acquire(WriteClass.JOBS)
        try:
            await self.jobs.api.patch_object(ref, namespace=child.namespace, name=child.name, patch=patch)
        except kube_errors.NotFoundError:
            return
        self.children_suspended += 1
        log.info(
            "child_job_suspended",
            job=f"{child.kind} {child.namespace}/{child.name}",
            ancestor=f"{child.ancestor.kind} {child.ancestor.name}",
            seq=seq,
        )
        item = kube_events.KubeEvent(
            workload=types.WorkloadRef(namespace=child.namespace, name=child.name),
            type="Normal",
            reason=CHILD_SUSPENDED_REASON,
            message=CHILD_SUSPENDED_MESSAGE,
            at_ms=wall_clock_ms(),
            job=(child.api_version, child.kind, child.uid),
        )
        self.recording.job_event(item, suffix=f"{seq:x}.suspended")
        await self.recording.record([])

    async def _delete_pods(self, action: core.StopPods, *, owner_uid: str) -> None:
        """Delete the pods of ``action``'s workload (a single pod only with the UID its workload names), each
        marked with the stop first, as an eviction's stop marks them, and given Kueue's Stopped Event "Workload is
        deleted"."""
        if self.gate is not None and not self.gate():
            return
        for pod in await self.jobs.pods_of(action):
            meta = objects.meta(pod)
            if meta.get("deletionTimestamp") or (not action.group and owner_uid and meta.get("uid") != owner_uid):
                continue
            name = str(meta.get("name") or "")
            if not await self._mark_and_delete(action, name):
                continue
            self.pods_deleted += 1
            log.info("pod_deleted_with_its_workload", pod=f"{action.namespace}/{name}", workload=action.workload.key)
            # Pod.Stop for StopReasonWorkloadDeleted: the Stopped Event on each pod it deletes (reconciler.go 1.1)
            uid = str(meta.get("uid") or "")
            item = kube_events.on_pod(
                action.namespace, name, uid, reason="Stopped", message=DELETED_STOP_MESSAGE, at_ms=wall_clock_ms()
            )
            self.recording.job_event(item, suffix=f"created.stopped.{uid or name}")
        await self.recording.record([])

    async def _mark_and_delete(self, action: core.StopPods, name: str) -> bool:
        """Mark pod ``name`` with ``action``'s stop, as an eviction's stop marks it, and delete it; False when it
        is gone already. Each write takes a job write token."""
        try:
            await self.jobs.limiter.acquire(WriteClass.JOBS)
            await self.jobs.api.patch_object(POD_REF, namespace=action.namespace, name=name, patch=action.mark())
            await self.jobs.limiter.acquire(WriteClass.JOBS)
            await self.jobs.api.delete_object(POD_REF, namespace=action.namespace, name=name)
        except kube_errors.NotFoundError:
            return False
        return True

    async def _stop_pods(self, key: str, action: core.StopPods, *, owner_uid: str, message: str) -> None:
        """Delete the pods of workload ``key`` that run (not gated, not terminated), each marked with the stop first
        and given Kueue's Stopped Event with ``message`` (Pod.Stop: gated and finished pods stay): while it is
        still not admitted (StopReasonNotAdmitted), or for good (its prebuilt Workload finished OutOfSync or
        gone: StopReasonNoMatchingWorkload)."""
        wl = self.view.cluster.workloads.get(key)
        if action.reason == NOT_ADMITTED_REASON and (
            wl is None or wl.gone or wl.finished is not None or (wl.admitted and wl.reservation is not None)
        ):
            return  # admitted since, or gone: nothing runs without quota
        if self.gate is not None and not self.gate():
            return
        for pod in await self.jobs.pods_of(action):
            meta = objects.meta(pod)
            if meta.get("deletionTimestamp") or pod_integration.is_gated(pod) or pod_integration.is_terminated(pod):
                continue
            if not action.group and owner_uid and meta.get("uid") != owner_uid:
                continue
            name = str(meta.get("name") or "")
            if not await self._mark_and_delete(action, name):
                continue
            self.stopped += 1
            log.info("pod_stopped", pod=f"{action.namespace}/{name}", workload=key, why=action.reason)
            uid = str(meta.get("uid") or "")
            item = kube_events.on_pod(
                action.namespace, name, uid, reason="Stopped", message=message, at_ms=wall_clock_ms()
            )
            self.recording.job_event(item, suffix=f"created.stopped.{uid or name}")  # a pod is deleted once
        await self.recording.record([])

    async def _start_pods(self, key: str, action: core.StartPods, *, seq: int) -> None:
        """Start the gated pods of Pod workload ``key``, adopted at ``seq`` while admitted, if it still is."""
        wl = self.view.cluster.workloads.get(key)
        if wl is None or wl.gone or wl.finished is not None or not wl.admitted or wl.reservation is None:
            return  # released or finished since: nothing to start
        if wl.eviction is not None or (self.gate is not None and not self.gate()):
            return
        message = kube_events.started_message(wl.reservation.cluster_queue)  # read now: the fold runs on meanwhile
        result = await self.jobs.start_pods(action, seq=seq)
        ungated = self.jobs.take_pods_written(seq)
        if not isinstance(result, types.DispatchFailed):
            self.restarted += 1
            log.info("pods_started_adopted", pods=result.target, workload=key, seq=seq)
        for name, uid in ungated:  # Kueue's Started on each pod it ungates (Pod.Run), as after an admission
            item = kube_events.on_pod(
                action.namespace, name, uid, reason="Started", message=message, at_ms=wall_clock_ms()
            )
            self.recording.job_event(item, suffix=f"created.started.{uid or name}")  # a pod is ungated once
        if ungated:
            await self.recording.record([])

    async def _job(self, wl: WorkloadState) -> tuple[dict[str, Any], bool] | None:
        """The workload's job as the API server has it and whether it is suspended; None when it is gone, being
        deleted, or a namesake with another UID."""
        owner = wl.workload.owner
        assert owner is not None
        integration = integrations.by_kind(owner.kind) if owner.kind != "Job" else None
        ref = JOB_REF if integration is None else resources.ref_for(integration.api_version, integration.kind)
        try:
            job = await self.jobs.api.get_object(ref, namespace=wl.workload.metadata.namespace, name=owner.name)
        except kube_errors.NotFoundError:
            return None
        meta = job.get("metadata") or {}
        if (owner.uid and meta.get("uid", owner.uid) != owner.uid) or meta.get("deletionTimestamp"):
            return None
        if integration is None:
            return job, (job.get("spec") or {}).get("suspend") is True
        return job, integrations.suspended(integration, job)

    async def _stop_unmatched(self, key: str, *, seq: int, at_ms: int) -> None:
        """Stop the job of prebuilt workload ``key``, finished OutOfSync at ``seq``, when it still runs."""
        wl = self.view.cluster.workloads.get(key)
        if wl is None or wl.finished is None or wl.finished.reason != prebuilt.OUT_OF_SYNC_REASON:
            return
        if self.gate is not None and not self.gate():
            return
        found = await self._job(wl)
        if found is not None and not found[1] and self.view.cluster.workloads.get(key) is wl:
            await self._stop(wl, seq=seq, at_ms=at_ms, reason=NO_MATCHING_REASON, message=NO_MATCHING_MESSAGE)

    async def _stop(
        self,
        wl: WorkloadState,
        *,
        seq: int,
        at_ms: int,
        reason: str = NOT_ADMITTED_REASON,
        message: str = NOT_ADMITTED_MESSAGE,
    ) -> None:
        action = core.stop_of(self.view, wl, wl.ref, reason=reason, seq=seq)
        if isinstance(action, core.StopJob):
            result = await self.jobs.stop_job(action, seq=seq)
        elif isinstance(action, core.StopIntegration):
            result = await self.jobs.write_integration(action, seq=seq)
        else:
            return
        stopped_now = self.jobs.stopped_now(seq)  # found suspended meanwhile: Kueue records no Stopped Event
        if isinstance(result, types.DispatchFailed):
            return
        self.stopped += 1
        log.info("job_stopped", job=f"{action.namespace}/{action.name}", workload=wl.key, seq=seq, why=reason)
        if stopped_now:
            self._event(wl, reason="Stopped", message=message, seq=seq, at_ms=at_ms)
        await self.recording.record([])

    async def _check_parent(self, parent: WorkloadState, *, seq: int, at_ms: int) -> None:
        """A ConcurrentAdmission parent's job, started and stopped by its variants' decisions: started again when
        it is found suspended while a variant is admitted and not being evicted, marked after that variant's
        reservation (reconciler.go step 7 on the parent Kueue's controller admitted with the variant's admission).
        Never stopped here: a variant's eviction stops it."""
        if core.running_variant(self.view, parent) is None:
            return
        found = await self._job(parent)
        variant = core.running_variant(self.view, parent)  # again: the fold ran on while the job was read
        if found is None or variant is None or not found[1]:
            return
        if seq >= self.view.reserved_seq.get(variant.key, 0):
            await self._start(variant, seq=seq, at_ms=at_ms, job_of=parent)

    async def _start(self, wl: WorkloadState, *, seq: int, at_ms: int, job_of: WorkloadState | None = None) -> None:
        """Start ``wl``'s job again (``job_of``: the workload whose job it is, when not ``wl``'s own: a
        ConcurrentAdmission parent's, for its variant ``wl``)."""
        if wl.reservation is None:
            return  # released before its job could be started again
        message = kube_events.started_message(wl.reservation.cluster_queue)  # read now: the fold runs on meanwhile
        action = core.start_of(self.view, wl, replacement_starts=True)  # a suspended job: a slice starts it too
        if not isinstance(action, core.StartJob | core.StartIntegration):
            return
        if isinstance(action, core.StartJob):
            result = await self.jobs.start_job(action, seq=seq)
        else:
            result = await self.jobs.write_integration(action, seq=seq)
        if isinstance(result, types.DispatchFailed):
            return
        self.restarted += 1
        log.info("job_started_again", job=f"{action.namespace}/{action.name}", workload=wl.key, seq=seq)
        self._event(job_of or wl, reason="Started", message=message, seq=seq, at_ms=at_ms)
        await self.recording.record([])

    def _event(self, wl: WorkloadState, *, reason: str, message: str, seq: int, at_ms: int) -> None:
        owner = wl.workload.owner
        assert owner is not None
        integration = integrations.by_kind(owner.kind) if owner.kind != "Job" else None
        api_version = "batch/v1" if integration is None else integration.api_version
        item = kube_events.KubeEvent(
            workload=types.WorkloadRef(namespace=wl.workload.metadata.namespace, name=owner.name),
            type="Normal",
            reason=reason,
            message=kube_events.truncate(message),
            at_ms=at_ms,
            job=(api_version, owner.kind, owner.uid),
        )
        self.recording.add_job_event(seq, item)


def _job_of_its_own(wl: WorkloadState) -> bool:
    """A batch/v1 Job's or a registered integration's workload (not Pods': their stop deletes them), not an
    elastic job's replacement slice (:func:`_job_owned`)."""
    return _job_owned(wl) and slices.replacement_for(wl.workload) is None


def _job_owned(wl: WorkloadState) -> bool:
    """A batch/v1 Job's or a registered integration's workload, a replacement slice of an elastic job included."""
    owner = wl.workload.owner
    return owner is not None and owner.kind != "Pod" and core.startable(owner.api_version, owner.kind)
