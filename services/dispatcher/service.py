"""The dispatcher service: carry admission and eviction decisions out in Kubernetes.

A durable consumer (explicit ack) over the per-workload decisions delivers each
at least once, in order. For each, the pure :func:`kueue_es.services.dispatcher.core.plan`
says what to write to the Job (start an admitted Job, stop an evicted one); the
:class:`Dispatcher` here has :class:`~kueue_es.services.dispatcher.job_writes.JobWrites`
write it, records the result on the log and only then acks: the decisions of one
DecisionRecord a batch applied in one DispatchBatchApplied on the record's subject
(:mod:`~kueue_es.services.dispatcher.record_results`: published expecting the subject's
last sequence, so a redelivery answers no decision twice), a DispatchFailed per decision
(its Msg-Id is the decision's sequence, so a redelivery records nothing new).
A Job that is gone (404, or a namesake with another UID) runs nothing: the runner
logs the workload deleted (ObjectDeleted, which releases its quota) and, for an
eviction, WorkloadStopped (Kueue: jobframework/reconciler.go, a missing job is not
active).

The Dispatcher is the runner: it folds the log, consumes decisions in batches and
routes each phase of a batch to one collaborator:

1. :class:`~kueue_es.services.dispatcher.object_sync.WorkloadSync`: the
   ``kueue.x-k8s.io/v1beta2`` Workload object and status of the batch's workloads made
   from a job (before the batch's Job writes; every other changed one apart from the
   batches);
2. :class:`~kueue_es.services.dispatcher.job_writes.JobWrites`: each decision's Job,
   JobSet or Pod writes, then its result on the log;
3. :class:`~kueue_es.services.dispatcher.recording.Recording`: the Kubernetes Events
   of the batch; then the acks (so a crash before the Events leaves the decisions to the
   next dispatcher, which writes them under the same names: at least once);
and, apart from the batches, :class:`~kueue_es.services.dispatcher.object_sync.QueueStatusSync`
writes the status of every ClusterQueue, LocalQueue and Cohort that changed, coalesced
(at most once per object per interval, the latest state).

Alongside, :class:`~kueue_es.services.dispatcher.ungating.Ungating` gives the gated
pods of Admitted TAS workloads their topology domains (SEMANTICS-ADVANCED A.12).
Every Kubernetes write waits for one write limiter
(:class:`~kueue_es.services.dispatcher.kube_api.WriteLimiter`, QPS and burst as
client-go's) in its priority class (:mod:`~kueue_es.services.dispatcher.write_budget`:
Job starts and stops, then Workload writes, then queue status), the Events for a second
one of the same size. The API server is
reached through :class:`~kueue_es.services.dispatcher.kube_api.KubeApi`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import structlog

from kueue_es.events import codec, job_owners, subjects, types
from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus.base import Bus, BusError, Delivery, DurableConsumer, LogMessage
from kueue_es.jobframework import workloads
from kueue_es.jobframework.annotations import DISPATCHER_FIELD_MANAGER
from kueue_es.projections import batches
from kueue_es.projections.cluster import ClusterState, UnknownEventError
from kueue_es.scheduling import concurrent_admission
from kueue_es.services import standby
from kueue_es.services.dispatcher import carried, core, job_writes, kube_events, lean
from kueue_es.services.dispatcher.concurrent_admission import VariantController
from kueue_es.services.dispatcher.job_writes import JobWrites, action_name
from kueue_es.services.dispatcher.kube_api import (
    DEFAULT_QUEUE_STATUS_INTERVAL,
    KubeApi,
    WriteLimiter,
    kube_api,
    limiter_from_env,
    queue_status_interval_from_env,
)
from kueue_es.services.dispatcher.object_sync import QueueStatusSync, StoredObjects, WorkloadSync
from kueue_es.services.dispatcher.record_results import RecordResults, record_of
from kueue_es.services.dispatcher.recording import Recording, workload_key
from kueue_es.services.dispatcher.retention import Retention
from kueue_es.services.dispatcher.settling import Settlement, Settling
from kueue_es.services.dispatcher.status import workload_key as status_key
from kueue_es.services.dispatcher.suspension import Suspension
from kueue_es.services.dispatcher.ungating import Ungating
from kueue_es.services.dispatcher.write_budget import WriteClass
from kueue_es.services.health import ObservedBus
from kueue_es.services.kube import errors as kube_errors
from kueue_es.services.kube import objects, resources
from kueue_es.services.runtime import (
    OrphanHook,
    StartPoint,
    cancel_and_wait,
    log_mismatch,
    report_orphan,
    require_from_start,
    run_until_stopped,
    wall_clock_ms,
)

if TYPE_CHECKING:
    from kubernetes_asyncio import client as k8s_client

log = structlog.get_logger(__name__)

DECISION_FILTERS = carried.FILTERS
"""The durable consumer's filter: the per-workload decision subjects (older logs) and the records' heads (event
schema 17: the decisions a DecisionRecord carries, handed over one by one by :class:`carried.CarriedDecisions`)."""
LEASE_USER = "dispatcher"
"""The dispatcher's key in KQ_LEASES is ``dispatcher.<partition>`` (``--standby-lease``)."""
FIELD_MANAGER = DISPATCHER_FIELD_MANAGER


RESULTS_ON_FAILURE_SECONDS = 5.0
"""Seconds a failed batch waits for the result of the Jobs it wrote before the failure (a lost lease)."""


class NotLeading(Exception):
    """A standby dispatcher's lease is no longer held (or not yet): it must not write."""


class Dispatcher:
    """Folds the log (to know flavors, jobs and queues) and executes decisions from a durable consumer.

    ``api``: the API server (a :class:`KubeApi`, or a kubernetes-asyncio client, wrapped).
    ``limiter`` rate-limits every write (default: Kueue's QPS 50, burst 100), the
    Kubernetes Events on Workloads with a second limiter of the same size
    (:attr:`event_limiter`); ``write_objects`` False leaves Workload objects, their
    Events and queue status alone (only Jobs are written) and folds lean
    (:mod:`~kueue_es.services.dispatcher.lean`: what the plan reads, no ungater fed). ``queue_status_interval``:
    seconds between two status writes of one queue.
    ``gate``: a standby dispatcher's lease (:func:`consume_while_leading`): every Job write first asks
    it and a closed gate raises :class:`NotLeading` (nothing more is written or acked).
    ``progress_every``: seconds between in-progress acks (``+WIP``) of every delivery fetched and not
    yet acked, while the gate is open, so a short ``ack_wait`` does not redeliver a batch being written
    (None: none, the 30 s ack wait covers a batch).
    """

    def __init__(
        self,
        *,
        bus: Bus,
        api: KubeApi | k8s_client.ApiClient,
        cluster: str = subjects.DEFAULT_CLUSTER,
        limiter: WriteLimiter | None = None,
        field_manager: str = FIELD_MANAGER,
        write_objects: bool = True,
        start: StartPoint | None = None,
        queue_status_interval: float = DEFAULT_QUEUE_STATUS_INTERVAL,
        gate: Callable[[], bool] | None = None,
        progress_every: float | None = None,
    ) -> None:
        self.bus, self.api, self.cluster = bus, kube_api(api), cluster
        self.gate = gate  # a standby dispatcher's lease: no Job write unless it says True
        self.progress_every = progress_every  # seconds between in-progress acks of the deliveries held
        # fetched, not yet acked or nak'ed (by decision: carried.decision_key)
        self._held: dict[tuple[int, int], Delivery] = {}
        self.start = start  # a snapshot to fold on from (its view: (DispatchState, orphaned decision seqs))
        self.view = core.DispatchState(track_objects=write_objects)
        self._folded = asyncio.Condition()
        self._fold_waiters = 0  # tasks waiting in _wait_fold_until: the fold notifies only while there are some
        self.limiter = limiter if limiter is not None else WriteLimiter()
        self.write_objects = write_objects
        self._gated = False  # consume() writes objects only once the fold has caught up with the log
        self._caught_up = False
        self._stranded: asyncio.Task[None] | None = None  # the check of a held batch under way (fold_forever)
        self.on_orphan: OrphanHook | None = None  # told of every orphaned message (a metric)
        self.orphaned_seqs: set[int] = set()  # orphaned decisions (kept: a redelivery is skipped too)
        self.applied = 0
        self.failed = 0
        # workload key -> the reservation (its log sequence) whose admission this process executed without a
        # start, an eviction being on the log already: its Job was never started for it (_never_started)
        self._unstarted: dict[str, int] = {}
        self.unwritten_stops = 0  # stops that needed no write: the Job was never started
        self.plan_failures = 0  # decisions whose plan raised (logged ``plan_failed``, acked, not carried out)
        self.jobs = JobWrites(api=self.api, limiter=self.limiter, on_excess=self._excess_pod_deleted)
        self.stored = StoredObjects(api=self.api, limiter=self.limiter, field_manager=field_manager)
        # Kubernetes Events: a budget of their own, of the same size (Kueue's event recorder is a
        # second client built from the same QPS and burst)
        event_limiter = type(self.limiter)(qps=self.limiter.qps, burst=self.limiter.burst)
        self.recording = Recording(api=self.api, limiter=event_limiter, view=self.view, stored=self.stored)
        # the applied decisions of one record in one pass: one DispatchBatchApplied (issue 18)
        self.record_results = RecordResults(bus=bus, cluster=cluster)
        # results and acks settle beside the next decisions; a delivery settled is no longer marked in progress
        self.settling = Settling(on_settled=lambda delivery: self._held.pop(carried.decision_key(delivery), None))
        self.workloads = WorkloadSync(
            bus=bus,
            cluster=cluster,
            view=self.view,
            stored=self.stored,
            created=self.recording.workload_created,
            deleted=self.recording.workload_deleted,
            finished=self.recording.workload_finished,
            updated=self.recording.workload_updated,
            job_event=lambda item, suffix: self.recording.job_event(item, suffix=suffix),
            record=self.settling.record,
            group_members=lambda namespace, group: self.ungating.members(namespace, group),
            absent_pods=lambda namespace, group, pod_sets: self.ungating.absent_pods(namespace, group, pod_sets),
            group_written=lambda namespace, group: self.ungating.group_workload_changed(namespace, group),
        )
        self.queues = QueueStatusSync(view=self.view, stored=self.stored, interval=queue_status_interval)
        self.ungating = Ungating(
            api=self.api,
            limiter=self.limiter,
            view=self.view,
            on_excess=self._excess_pod_deleted,
            on_started=self._pod_started_late,
            workload_owners=self._workload_owners,
        )
        self._pod_events_flush: asyncio.Task[None] | None = None
        # a job started or suspended by hand is put back in line with its workload's admission (reconciler.go 7, 8)
        self.suspension = Suspension(
            view=self.view, jobs=self.jobs, recording=self.recording, gate=lambda: self.gate is None or self.gate()
        )
        # the Configuration's objectRetentionPolicies: finished and deactivated Workloads deleted once due
        self.retention = Retention(
            view=self.view,
            stored=self.stored,
            workloads=self.workloads,
            jobs=self.jobs,
            recording=self.recording,
            bus=bus,
            gate=lambda: self.gate is None or self.gate(),
        )

    def _workload_owners(self, namespace: str, name: str) -> set[str] | None:
        """The UIDs the Workload object ``namespace/name`` names as owners, as the server last answered (None when
        no object is kept)."""
        stored = self.stored.objects.get(("Workload", namespace, name))
        if stored is None:
            return None
        refs = objects.meta(stored).get("ownerReferences") or []
        return {str(ref.get("uid")) for ref in refs if isinstance(ref, dict) and ref.get("uid")}

    def _excess_pod_deleted(self, pod: objects.Pod) -> None:
        """A pod beyond its group's count was deleted: Kueue's Normal ``ExcessPodDeleted`` Event on it."""
        self._pod_event(pod, "excess", reason=job_writes.EXCESS_POD_REASON, message=job_writes.EXCESS_POD_MESSAGE)

    def _pod_started_late(self, pod: objects.Pod, cluster_queue: str) -> None:
        """A pod that joined its admitted group was started: Kueue's Normal ``Started`` Event on it (Pod.Run)."""
        self._pod_event(pod, "started", reason="Started", message=kube_events.started_message(cluster_queue))

    def _pod_event(self, pod: objects.Pod, what: str, *, reason: str, message: str) -> None:
        """Kueue's Event ``reason`` on ``pod``, written at once (not only with the next batch's Events) and named
        after the pod's UID and ``what`` happened to it, which happens to a pod once."""
        meta = objects.meta(pod)
        namespace, name, uid = str(meta.get("namespace") or "default"), str(meta["name"]), str(meta.get("uid") or "")
        item = kube_events.on_pod(namespace, name, uid, reason=reason, message=message, at_ms=wall_clock_ms())
        self.recording.job_event(item, suffix=f"created.{what}.{uid or name}")  # the names Events had before
        if self._pod_events_flush is None or self._pod_events_flush.done():
            self._pod_events_flush = asyncio.ensure_future(self.record_events())

    @property
    def state(self) -> ClusterState:
        """The cluster as folded so far."""
        return self.view.cluster

    @property
    def object_writes(self) -> int:
        """Writes of Workload objects and queue status so far."""
        return self.stored.writes

    @property
    def object_failures(self) -> int:
        """Workload and queue status writes that failed for good."""
        return self.stored.failures

    def backlog(self) -> dict[str, int]:
        """Writes waiting, by write class (``jobs``, ``workloads``, ``queues``): those waiting for a token, and
        the Workloads and queues changed and not yet written."""
        waiting = {cls.label: self.limiter.waiting(cls) for cls in WriteClass}
        waiting[WriteClass.WORKLOADS.label] += len(self.view.dirty_workloads)
        waiting[WriteClass.QUEUES.label] += self.queues.pending()
        return waiting

    @property
    def event_limiter(self) -> WriteLimiter:
        """The Kubernetes Events' write limiter."""
        return self.recording.limiter

    @property
    def events_written(self) -> int:
        """Kubernetes Events written so far."""
        return self.recording.written

    @property
    def ungated(self) -> int:
        """Pods given their topology domain so far."""
        return self.ungating.ungated

    # -- folding ---------------------------------------------------------------------------------

    async def fold_forever(self) -> None:
        """Keep the state folded up to the end of the log.

        Every message goes through the same batch verifier as the deciders' fold
        (``runtime.fold_message``, :mod:`kueue_es.projections.batches`): only verified
        decision batches are folded, orphans are logged and counted, never executed.
        """
        start_seq = await self._resume()
        try:
            await self._fold_from(start_seq)
        finally:
            if self._stranded is not None:
                await cancel_and_wait([self._stranded])

    async def _fold_from(self, start_seq: int) -> None:
        cluster = self.view.cluster
        async for message in self.bus.read(subjects=(subjects.FACTS, subjects.DECISIONS), start_seq=start_seq):
            self.fold_message(message)
            if message.pending == 0 and cluster.batches.holding and (self._stranded is None or self._stranded.done()):
                # asked beside the fold: an answer that takes its whole timeout (NATS just came back)
                # must not keep the reader from resuming
                self._stranded = asyncio.create_task(self._expire_stranded())
            self._caught_up = self._caught_up or message.pending == 0
            if self._fold_waiters:  # a notify per message (a lock taken) was 2 % of the dispatcher's CPU
                async with self._folded:
                    self._folded.notify_all()

    def fold_message(self, message: LogMessage) -> None:
        """Fold one message read from the log: decode it, offer it to the batch verifier and fold what it
        accepts (a lean view, :data:`~kueue_es.services.dispatcher.core.LEAN_SKIPPED`, does not even decode
        a fact it only counts, :func:`~kueue_es.services.dispatcher.lean.skippable`, unless a batch is open:
        a fact inside a batch breaks it)."""
        cluster = self.view.cluster
        if not self.view.track_objects and not cluster.batches.holding:
            if lean.skippable(message.subject, message.headers):
                cluster.last_seq = max(cluster.last_seq, message.seq)
                return
        try:
            event: types.Event | None = codec.decode(message.data)
        except codec.DecodeError as err:  # skipped, as every service skips it; its sequence still counts
            event = None
            if batches.partition_of(message.subject) is None:  # else an orphan, reported below
                log.warning("event_undecodable", seq=message.seq, subject=message.subject, error=str(err))
            cluster.last_seq = max(cluster.last_seq, message.seq)
        verdict = cluster.batches.offer(
            seq=message.seq,
            subject=message.subject,
            msg_id_header=message.headers.get("Nats-Msg-Id", ""),
            data=message.data,
            event=event,
        )
        self._orphaned(verdict.orphans)
        for seq, accepted in (
            (seq, one)
            for seq, event in verdict.accepted
            for one in types.unbatched(event)  # a FactBatch's facts
        ):
            if self.write_objects and isinstance(accepted, types.ObjectDeleted):  # before the fold forgets it
                self.suspension.workload_deleted(
                    accepted, cluster.workloads.get(f"{accepted.namespace}/{accepted.name}"), seq=seq
                )
            owner_before = None
            if self.write_objects and isinstance(accepted, types.WorkloadObserved):
                before = cluster.workloads.get(accepted.workload.key)
                owner_before = before.workload.owner if before is not None else None
            if self.write_objects:  # the Workload object a decision is about, for its Events' keys
                self.recording.decided(accepted, seq)
            try:
                core.fold(self.view, accepted, seq=seq)
            except UnknownEventError as err:  # raised before the fold touches the state, as in runtime
                log.warning("event_unclassified", seq=seq, error=str(err))
                cluster.last_seq = max(cluster.last_seq, seq)
            else:
                if self.write_objects:  # the queues' status and the ungater: only with a real API server
                    self.stored.observed(accepted)
                    self.ungating.recheck_held()
                    if (node := core.node_of_event(accepted)) is not None:
                        self.ungating.node_changed(node)
                    if (key := status_key(accepted)) is not None:
                        self.retention.touched(key)
                        # a pod group's Workload observed, finished or deleted: its pods' finalizers looked at again
                        self.ungating.group_workload_changed(*key.split("/", 1))
                    elif isinstance(accepted, types.ConfigurationObserved):
                        self.retention.configured()
                    if isinstance(accepted, types.WorkloadAdmitted | types.TopologyAssigned):
                        self.ungating.mark(accepted.workload.key)
                        if isinstance(accepted, types.WorkloadAdmitted):
                            self.suspension.replacement_admitted(accepted.workload.key, seq=seq)
                    elif isinstance(accepted, types.WorkloadPodsReady):
                        self.suspension.observed(accepted)
                    elif isinstance(accepted, types.WorkloadObserved):
                        if accepted.workload.owner != owner_before:
                            self.suspension.adopted(accepted.workload.key, seq=seq)
                        if job_owners.serving_parent(accepted.workload) is not None:
                            # its gated pods follow its parent's LocalQueue
                            self.ungating.requeued(accepted.workload.key, accepted.workload.spec.queue_name)
                    elif isinstance(accepted, types.WorkloadFinished):
                        self.suspension.finished(accepted, seq=seq)
                    elif isinstance(accepted, types.ChildJobObserved):
                        self.suspension.child_observed(accepted, seq=seq)

    async def _resume(self) -> int:
        """Take the start point (a snapshot of this log: its view becomes the fold, in place, as the
        collaborators hold the view) and return the sequence to read from; without one, 1, unless the
        log was purged (LogPurgedError)."""
        start, self.start = self.start, None
        if start is not None:
            problem = await log_mismatch(self.bus, start)
            if problem is not None:
                log.warning("checkpoint_not_used", checkpoint=start.origin, seq=start.seq, reason=problem)
                start = None
        if start is None:
            await require_from_start(self.bus, "dispatcher")
            return 1
        view, orphaned = start.view
        if view.track_objects != self.view.track_objects:
            raise ValueError(f"snapshot {start.origin}: its dispatcher view keeps objects={view.track_objects}")
        for name in (
            "cluster",
            "reserved_seq",
            "records",
            "started",
            "dirty_workloads",
            "dirty_queues",
            "unwritten_releases",
            "deleted_workloads",
            "not_matching",
            "adopted_admitted",
            "object_versions",
        ):
            setattr(self.view, name, getattr(view, name))
        self.orphaned_seqs |= set(orphaned)
        self.bus.folded_through(start.seq)  # ready at once when nothing follows the snapshot
        for key, wl in self.view.cluster.workloads.items():
            if wl.admitted:
                self.ungating.mark(key)
        if self.write_objects:
            self.retention.rebuild()
        with contextlib.suppress(BusError):  # nothing after the snapshot: no message will say so
            self._caught_up = await self.bus.last_seq() <= start.seq
        log.info(
            "started_from_checkpoint", checkpoint=start.origin, seq=start.seq, workloads=len(view.cluster.workloads)
        )
        return start.seq + 1

    def _orphaned(self, orphans: tuple[batches.Orphan, ...]) -> None:
        """Report ``orphans``, count their sequences as folded, and remember the decisions among
        them: a delivery of one is acked and never executed."""
        cluster = self.view.cluster
        for orphan in orphans:
            report_orphan(orphan, self.on_orphan)
            cluster.last_seq = max(cluster.last_seq, orphan.seq)
            if batches.partition_of(orphan.subject) is not None:
                self.orphaned_seqs.add(orphan.seq)

    async def _expire_stranded(self) -> None:
        """The fold read the last message there was and holds a batch: if the log ends before that
        batch does, its outputs never come (a batch is stored whole; a rogue record), so it is
        orphaned now (:meth:`batches.BatchVerifier.expire`), as the deciders do, instead of holding
        the decisions delivered from it, and every one after, until another message breaks it."""
        cluster = self.view.cluster
        held = cluster.batches.holding_until
        try:
            last = await self.bus.last_seq()
        except BusError as err:
            log.warning("stranded_batch_unchecked", holding_until=held, error=str(err))
            return
        if cluster.batches.holding_until == held:  # nothing folded meanwhile (the reader is the only folder)
            self._orphaned(cluster.batches.expire(last).orphans)
            async with self._folded:
                self._folded.notify_all()

    async def _wait_folded(self, seq: int) -> None:
        await self._wait_fold_until(lambda: self.state.last_seq >= seq)

    async def _wait_fold_until(self, predicate: Callable[[], bool]) -> None:
        """Return once ``predicate()`` holds, looking again after every message folded (the fold
        notifies only while someone waits here)."""
        if predicate():
            return
        self._fold_waiters += 1
        try:
            async with self._folded:
                await self._folded.wait_for(predicate)
        finally:
            self._fold_waiters -= 1

    def _ready(self) -> bool:
        return self.write_objects and (self._caught_up or not self._gated)

    # -- decisions, in batches -------------------------------------------------------------------

    FETCH_BATCH = 100
    """Decisions taken per fetch. A batch's acks go out when it is done, and the next batch is
    fetched meanwhile: at most two batches' Job writes (4 s at 50 writes/s) stand between a
    delivery and its ack, well inside the consumer's 30 s ack wait."""

    async def consume(self, consumer: DurableConsumer) -> None:
        """Fetch, execute and settle decisions forever; objects are brought up to date after every fetch.

        The next fetch is under way while a batch is handled (one fetch at a time, batches
        handled one after the other in delivery order), so a batch does not wait a round
        trip to the server after the one before: on a busy machine that wait was most of
        the time from an admission to its Job write. A batch's results and acks settle
        beside the next batches (:mod:`~kueue_es.services.dispatcher.settling`): an ack that
        keeps failing holds no later decision; once :data:`~.settling.MAX_SETTLING` decisions
        settle, nothing more is fetched until some have. Raises what a settlement raises.
        """
        self._gated = True  # not before the fold reaches the end: it would write the past on the way
        await self.prime()
        self._held.clear()
        upcoming = asyncio.ensure_future(self._fetch(consumer))
        apart = asyncio.ensure_future(self.write_apart_from_batches())
        progress = asyncio.ensure_future(self._keep_in_progress(consumer)) if self.progress_every else None
        try:
            while True:
                deliveries = await upcoming
                await self.settling.room()
                upcoming = asyncio.ensure_future(self._fetch(consumer))
                await self._dispatch_batch(consumer, deliveries)
                self.settling.check()
                if apart.done():
                    apart.result()  # the writes apart from the batches failed: raise it, as a batch's failure
        finally:
            for task in (upcoming, apart, progress):
                if task is None:
                    continue
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
            await self.settling.close()

    async def _fetch(self, consumer: DurableConsumer) -> list[Delivery]:
        deliveries = await consumer.fetch(batch=self.FETCH_BATCH, timeout=1.0)
        if not self.write_objects:  # a record's pending outcomes are there for their Events only
            deliveries = [d for d in deliveries if not carried.is_pending(d)]
        self._held.update((carried.decision_key(d), d) for d in deliveries if not carried.is_pending(d))
        return deliveries

    async def _keep_in_progress(self, consumer: DurableConsumer) -> None:
        """Every ``progress_every`` s, while the gate is open, restart the ack wait of every delivery
        held (fetched, not yet acked): a holder that stops (killed, or lost its lease) stops these, and
        what it held is delivered again one ack wait later, to whoever holds the lease then."""
        assert self.progress_every is not None
        while True:
            await asyncio.sleep(self.progress_every)
            if self.gate is not None and not self.gate():
                continue
            window = asyncio.timeout(self.progress_every)  # a mark tried again for longer waits for the next round
            try:
                async with window:
                    for delivery in list(self._held.values()):
                        await consumer.in_progress(delivery)
            except (BusError, TimeoutError) as err:  # the next round tries again; redelivery is safe anyway
                if isinstance(err, TimeoutError) and not window.expired():
                    raise
                log.warning("in_progress_failed", error=str(err) or "still being tried again")

    async def handle(self, consumer: DurableConsumer, delivery: Delivery) -> None:
        """Execute one delivered decision; return once it is acked (its result on the log first)."""
        await self.handle_batch(consumer, [delivery])

    async def handle_batch(self, consumer: DurableConsumer, deliveries: list[Delivery]) -> None:
        """Execute a batch of delivered decisions (possibly none) as :meth:`consume` does, and return once
        the batch is settled: every result stored and every decision acked (or its ack given up).
        Raises the batch's failure (nothing more of it acked)."""
        settled = await self._dispatch_batch(consumer, deliveries)
        if settled:
            await asyncio.gather(*settled)
        self.settling.check()

    async def _dispatch_batch(self, consumer: DurableConsumer, deliveries: list[Delivery]) -> list[asyncio.Task[None]]:
        """Execute a batch of delivered decisions: Workload objects first, then each decision's Job write and
        result, then the batch's Events, then hand the batch over to settle
        (:mod:`~kueue_es.services.dispatcher.settling`: its acks once its results are stored), so a decision is
        acked only once its Events were written (at least once across a crash); returns the tasks the batch's settling is in
        (a decision delivered again while it settles joins its first delivery's). Only the Workloads of the
        batch's decisions are written here, and no queue status (:meth:`write_apart_from_batches`): a flood
        of those never holds up a decision; nor does a result or an ack that keeps failing.

        Results go out pipelined: each decision's Job write waits for the one before (the
        write limiter keeps its order), but its result is published without waiting for
        the JetStream ack of the previous result (one connection keeps them in order on
        the log), and the batch's acks go out together once every result is stored. A
        decision that needs more facts after its result (a gone Job, a job that cannot
        start) has them published once every result before it is stored, and the results
        after it wait for them, so the log's order is the one-at-a-time order. A failure
        while executing stops the batch with nothing of it acked: redelivery repeats what
        was not recorded (the results' Msg-Ids make a repeat a duplicate)."""
        decoded: list[tuple[Delivery, types.Event]] = []
        done: list[Settlement] = []  # acked once the results published before are stored
        joined: list[asyncio.Task[None]] = []  # the settling of decisions delivered again while they settle
        settling = self.settling
        for delivery in deliveries:
            key = carried.decision_key(delivery)
            if carried.is_pending(delivery):  # a record's pending outcome: its status and Event, nothing to settle
                decision = carried.carried_decision(delivery)
                if decision is not None and self.write_objects:
                    decoded.append((delivery, decision))
                continue
            if key in settling.entries:  # delivered again while it settles: not redone
                joining = settling.redelivered(consumer, delivery)
                if joining is not None:
                    joined.append(joining)
                continue
            if settling.stored_before(key):  # its result is on the log: acked, not redone
                done.append(Settlement(consumer=consumer, delivery=delivery))
                continue
            decision = carried.carried_decision(delivery)  # one a record carries: decoded with it
            if decision is not None:
                decoded.append((delivery, decision))
                continue
            try:
                decoded.append((delivery, codec.decode(delivery.message.data)))
            except codec.DecodeError as err:
                log.warning("decision_undecodable", seq=delivery.message.seq, error=str(err))
                done.append(Settlement(consumer=consumer, delivery=delivery))
        if decoded:
            await self._wait_folded(max(d.message.seq for d, _ in decoded))
        orphans = [(d, event) for d, event in decoded if d.message.seq in self.orphaned_seqs]
        for delivery, _ in orphans:  # decisions outside a verified batch are never executed (acked, skipped)
            if carried.is_pending(delivery):
                continue
            log.warning("orphan_not_executed", seq=delivery.message.seq, subject=delivery.message.subject)
            done.append(Settlement(consumer=consumer, delivery=delivery))
        if orphans:
            decoded = [(d, event) for d, event in decoded if d.message.seq not in self.orphaned_seqs]
        keys = [workload_key(event) for _, event in decoded]
        self.recording.before_writes(keys)  # the objects Kueue would have decided on, for its Events' keys
        await self.sync_workloads(keys)
        # the decisions' own Events once their Workload objects are written and before their jobs are: Kueue's
        # scheduler records them as it decides, on the objects it decided on, before any job reconciler acts (a
        # preempted pod deleted takes its Workload with it), and they are made from the fold as it stands now,
        # not from one that has since folded what the job writes brought about
        await self.record_decision_events(
            [(d.message.seq, event) for d, event in decoded], places=[carried.decision_index(d) for d, _ in decoded]
        )
        try:
            for delivery, event in decoded:
                if not carried.is_pending(delivery):
                    await self._execute(consumer, delivery, event, done=done)
            self.record_results.flush(self.settling)
        except BaseException:
            # the Jobs written before the failure (a lost lease, a stop) get their result, as each got
            # its own before results were gathered per record; nothing of the batch is acked
            written = self.record_results.flush(self.settling)
            results = [entry.stored for entry in done if entry.stored is not None and entry.stored is not written]
            for future in results:
                future.cancel()
            await asyncio.gather(*results, return_exceptions=True)
            if written is not None:
                with contextlib.suppress(BaseException):
                    async with asyncio.timeout(RESULTS_ON_FAILURE_SECONDS):
                        await asyncio.shield(written)
            raise
        # the job writes' Events (Started, Stopped) before the batch's acks (its results are published
        # meanwhile): a dispatcher that dies in between leaves the decisions unacked, so the one after it gets
        # them again, carries them out again (a write that changes nothing) and writes their Events under the
        # same names (AlreadyExists for those written): at least once. Acked first, a kill there lost them (a
        # Job that ran, no Started).
        await self.record_events()
        if done:
            joined.append(self.settling.settle(done))
            # one turn of the loop for the batch's result publishes and settling: with Job writes that never
            # wait (the simulated API) the next batches would otherwise pile up ahead of them
            await asyncio.sleep(0)
        return joined

    async def prime(self) -> None:
        """Learn what the server holds of the objects we keep, so unchanged ones are not written again."""
        if self.write_objects:
            await self.stored.prime()

    async def sync_workloads(self, keys: list[str] | None = None) -> None:
        """Bring the Workload object and status of every changed workload made from a Job up to date (only
        those of ``keys``, ``namespace/name``, when given)."""
        if self._ready():
            await self.workloads.sync(keys)

    async def record_decision_events(
        self, decisions: list[tuple[int, types.Event]], *, places: Sequence[int] = ()
    ) -> None:
        """Write the job Events collected so far (a Workload object's CreatedWorkload) and the Kubernetes Events of
        these decisions (``(log sequence, decision)``; ``places``: each one's place among its record's carried
        decisions, 0 for one of its own message), before their job writes
        (:class:`~kueue_es.services.dispatcher.recording.Recording`)."""
        if self._ready():
            await self.recording.record(decisions, places=places)
        else:
            self.recording.discard_job_events()

    async def record_events(self) -> None:
        """Write the job Events collected (those of the batch's job writes: Started, Stopped) and the Warnings of
        the objects refused since the last call (:class:`~kueue_es.services.dispatcher.recording.Recording`)."""
        if self._ready():
            await self.recording.record([])
            await self.recording.rejections()
        else:
            self.recording.discard_job_events()

    async def sync_queues(self) -> None:
        """Write the status of every ClusterQueue, LocalQueue and Cohort whose status changed and is due
        (at most once per object per interval)."""
        if self._ready():
            await self.queues.sync()

    async def write_apart_from_batches(self) -> None:
        """Keep writing, apart from the batches, the changed Workloads no decision of a batch is about and the
        queues' status (cancel to stop); run by :meth:`consume`."""
        await asyncio.gather(
            self.workloads.run(ready=self._ready),
            self.queues.run(ready=self._ready),
            self.suspension.run(ready=self._ready),
            self.retention.run(ready=self._ready),
            self.recording.run(ready=self._ready, clock=wall_clock_ms),
        )

    # -- the Job writes of decisions -----------------------------------------------------------

    async def _execute(
        self, consumer: DurableConsumer, delivery: Delivery, event: types.Event, *, done: list[Settlement]
    ) -> None:
        message = delivery.message
        try:
            action = core.plan(self.view, event, seq=message.seq)
        except Exception:  # a fault of ours with one decision: logged and skipped, never a stopped (or looping) service
            log.exception("plan_failed", seq=message.seq, kind=type(event).__name__, subject=message.subject)
            self.plan_failures += 1
            done.append(Settlement(consumer=consumer, delivery=delivery))
            return
        if action is None:
            if isinstance(event, types.WorkloadAdmitted):
                self._note_unstarted(event.workload.key, seq=message.seq)
            done.append(Settlement(consumer=consumer, delivery=delivery))
            return
        name = action_name(action)
        if self.gate is not None and not self.gate():
            raise NotLeading(f"lost the dispatcher's lease before writing decision {message.seq}")
        written = True
        # the stop of a job deactivated by hand follows its release: it may never have started, so it is read first
        deactivated = isinstance(event, types.QuotaReleased)
        deleted = isinstance(event, types.QuotaReleased) and event.reason == core.DELETED_REASON
        try:
            if deleted:
                assert isinstance(action, core.StopJob | core.StopIntegration)
                if not await self._runs(action, seq=message.seq):
                    core.forget_deleted_stop(self.view, action.workload.key, seq=message.seq)
                    done.append(Settlement(consumer=consumer, delivery=delivery))
                    return
            if isinstance(action, core.StopJob) and (deactivated or self._never_started(action.workload.key)):
                result, written = await self.jobs.stop_never_started(action, seq=message.seq)
            else:
                result = await self.jobs.carry_out(action, seq=message.seq)
        except (kube_errors.ApiError, kube_errors.ConnectionFailedError) as err:
            if not isinstance(err, kube_errors.ApiError) or err.status >= 500 or err.status == 429:
                log.warning("dispatch_retry", seq=message.seq, action=name, error=str(err))
                self.settling.nak(consumer, delivery, delay=min(2.0**delivery.attempt, 30.0))
                # delivered again after the delay, not marked in progress
                self._held.pop(carried.decision_key(delivery), None)
                return
            result = types.DispatchFailed(
                workload=action.workload,
                decision_seq=message.seq,
                action=name,
                status=err.status,
                reason=err.reason,
                message=str(err),
            )
        pods = self.jobs.take_pods_written(message.seq)  # a Pod workload's: each gets its Started or Stopped Event
        # Kueue records no Stopped Event for a job it did not have to suspend (never started, or stopped already)
        stopped_now = self.jobs.stopped_now(message.seq) and written
        if deleted:
            core.forget_deleted_stop(self.view, action.workload.key, seq=message.seq)
        # a stop without a write is reported stopped by the dispatcher (no mark for the watcher): after its result
        unwritten = isinstance(result, types.DispatchApplied) and not written
        if unwritten:
            self.unwritten_stops += 1
        index = carried.decision_index(delivery)
        record = record_of(message, index) if isinstance(result, types.DispatchApplied) and not unwritten else None
        if record is not None and not isinstance(action, core.FailStart):
            assert isinstance(result, types.DispatchApplied)
            settlement = Settlement(consumer=consumer, delivery=delivery)
            # its stored: the record's result
            self.record_results.add(record, result, settlement, self.settling, index=index)
            self.applied += 1
            if stopped_now:
                self.recording.job_write(action, seq=message.seq, decision=event, pods=pods)
            done.append(settlement)
            return
        self.record_results.flush(self.settling)  # the results before this one go first, as decided
        if isinstance(result, types.DispatchFailed) and delivery.attempt > 1 and (record := record_of(message, index)):
            if await self.record_results.answered_already(record, message.seq, index):
                # applied and answered before a restart or a takeover (its ack lost): answered once
                log.info("decision_answered_before", seq=message.seq, status=result.status)
                done.append(Settlement(consumer=consumer, delivery=delivery))
                return
        publish = self.bus.publish(
            subjects.message(
                result,
                subject=subjects.dispatch_subject(action.workload, self.cluster),
                # a carried decision's: the record's sequence and the decision's place in it
                msg_id=f"disp:{self.cluster}:{message.seq}" + (f":{index}" if index else ""),
            )
        )
        gone = isinstance(result, types.DispatchFailed) and result.status == 404
        # a FailStart, or a start the job's own template refused (job_writes.failed_start)
        failed_start = isinstance(result, types.DispatchFailed) and result.reason == job_writes.FAILED_TO_START
        stored: asyncio.Future[Any]
        if gone or unwritten or failed_start:

            async def facts(action: core.Action = action, seq: int = message.seq, result: Any = result) -> None:
                if gone:
                    await self._report_gone(action, seq=seq)
                if unwritten and isinstance(action, core.StopJob) and not deactivated:  # released: nothing to report
                    await self._report_stopped(action, seq=seq)
                if failed_start:
                    await self._report_failed_start(action.workload, message=result.message, seq=seq)

            stored = self.settling.result_then(publish, facts)
        else:
            stored = self.settling.result(publish)
        if isinstance(result, types.DispatchApplied):
            self.applied += 1
            if stopped_now:  # Kueue records no Stopped Event for a job it did not have to suspend
                self.recording.job_write(action, seq=message.seq, decision=event, pods=pods)
        else:
            self.failed += 1
        done.append(Settlement(consumer=consumer, delivery=delivery, stored=stored))

    async def _runs(self, action: core.StopJob | core.StopIntegration, *, seq: int) -> bool:
        """Whether the job of a workload whose Workload was deleted still runs, so its stop is written; a job
        gone too (deleting it is what deleted its workload) or suspended calls for nothing, no result."""
        if await self.jobs.runs(action):
            return True
        log.info("job_stop_not_needed", job=f"{action.namespace}/{action.name}", seq=seq, why="gone or suspended")
        return False

    def _note_unstarted(self, key: str, *, seq: int) -> None:
        """The admission of ``key`` at ``seq`` planned no start: remember its reservation when that is because
        an eviction of it is on the log already (Kueue's reconciler does not start it either) and the admission
        is of that live reservation (not a redelivered older one), so the stop that follows knows the Job was
        never started for it."""
        current = self.view.cluster.workloads.get(key)
        reserved = self.view.reserved_seq.get(key, 0)
        if current is not None and current.reservation is not None and current.eviction is not None and seq >= reserved:
            self._unstarted[key] = reserved

    def _never_started(self, key: str) -> bool:
        """Whether ``key``'s live reservation is one whose start this process skipped (:meth:`_note_unstarted`);
        forgotten once asked. A process that did not execute that admission (a restart, a takeover) does not
        know, and stops the Job as usual."""
        reserved = self._unstarted.pop(key, None)
        return reserved is not None and reserved == self.view.reserved_seq.get(key, 0)

    async def _report_stopped(self, action: core.StopJob | core.StopIntegration | core.StopPods, *, seq: int) -> None:
        """Nothing of the evicted workload runs and no stop's write marked a job for the watcher (a job never
        started, or gone): WorkloadStopped, with the Msg-Id the watcher would give this eviction's stop
        (``convert.stop_version``), so it is reported once."""
        stopped = types.WorkloadStopped(workload=action.workload, reason=action.reason, at_ms=wall_clock_ms())
        await self.bus.publish(subjects.fact_message(stopped, version=f"evict-{seq}"))

    async def _report_failed_start(self, workload: types.WorkloadRef, *, message: str, seq: int) -> None:
        """The job cannot start: Kueue finishes its workload with reason FailedToStart and ``message``
        (reconciler.go)."""
        finished = types.WorkloadFinished(
            workload=workload,
            succeeded=False,
            reason=job_writes.FAILED_TO_START,
            message=message,
            at_ms=wall_clock_ms(),
        )
        await self.bus.publish(subjects.fact_message(finished, version=f"disp-{seq}"))

    async def _report_gone(self, action: core.Action, *, seq: int) -> None:
        """The workload's Job is gone, so nothing runs and the workload is gone with it.

        For an eviction, WorkloadStopped with the Msg-Id the watcher would give this
        eviction's stop (``convert.stop_version``), so it is reported once; for every
        action, ObjectDeleted of the workload (its UID, so a re-created namesake is not
        touched), which releases its quota. Msg-Ids carry the decision's sequence, so a
        redelivery publishes nothing new.
        """
        if isinstance(action, core.StopJob | core.StopIntegration | core.StopPods):
            await self._report_stopped(action, seq=seq)
        ref = action.workload
        if await self._outlives_its_job(ref):
            log.info("job_gone_workload_kept", workload=ref.key, seq=seq)
            return
        deleted = types.ObjectDeleted(kind="Workload", namespace=ref.namespace, name=ref.name, uid=ref.uid)
        await self.bus.publish(subjects.fact_message(deleted, version=f"disp-{seq}"))

    async def _outlives_its_job(self, ref: types.WorkloadRef) -> bool:
        """Whether the Workload object of ``ref`` outlives its gone job: its job was deleted with
        ``propagationPolicy: Orphan`` (the garbage collector took the owner reference off before the job went), so
        the watcher finishes it ``OwnerNotFound`` and it stays, as in Kueue (workload_controller.go
        isOrphanedWorkload). A start that lagged behind such a delete must not delete it. Read from the API server
        (only where the dispatcher writes objects); a read error counts as not (the job's deletion stands)."""
        if not self.write_objects:
            return False
        try:
            current = await self.api.get_object(resources.WORKLOADS, namespace=ref.namespace, name=ref.name)
        except (kube_errors.ApiError, OSError, TimeoutError):
            return False
        labels = (current.get("metadata") or {}).get("labels") or {}
        return workloads.is_orphaned(current) and labels.get(workloads.JOB_UID_LABEL) == ref.uid

    # -- the TAS ungater ---------------------------------------------------------------------------

    async def watch_pods(self) -> None:
        """Keep the pods that carry the pod set label and wake the ungater for their workloads, and the pods of
        pod groups, whose gated late members of an admitted group it starts (cancel to stop)."""
        await asyncio.gather(
            self.ungating.watch_pods(), self.ungating.watch_group_pods(), self.ungating.watch_statefulsets()
        )

    async def concurrent_admission_forever(self) -> None:
        """Kueue's concurrent-admission controller (:mod:`~kueue_es.services.dispatcher.concurrent_admission`),
        while the folded Configuration turns the gate ConcurrentAdmission on; only with a real API server
        (cancel to stop)."""
        if not self.write_objects:
            return
        await self._wait_fold_until(lambda: self._caught_up)
        cluster = self.view.cluster
        controller = VariantController(
            self.api, enabled=lambda: concurrent_admission.enabled(cluster.configuration.feature_gates)
        )
        await controller.run()

    async def ungate_forever(self, *, retry_seconds: float = 1.0) -> None:
        """Ungate the gated pods of Admitted TAS workloads whenever a pod or the workload changes (cancel to stop)."""
        # not on a half-folded past: a workload admitted then may be evicted since
        await self._wait_fold_until(lambda: self._caught_up)
        await self.ungating.run(retry_seconds=retry_seconds)


LEADING_POLL = 0.05
"""Seconds between two looks at the lease while leading (a lost lease stops the writes this soon) or
standing by (a takeover starts them this soon)."""


async def consume_while_leading(
    dispatcher: Dispatcher,
    bind: Callable[[], Awaitable[DurableConsumer]],
    lease: standby.DeciderLease,
    *,
    also: Sequence[Callable[[], Awaitable[None]]] = (),
    poll: float = LEADING_POLL,
) -> None:
    """Consume decisions (and run ``also``, e.g. the ungater) only while ``lease`` is active, forever.

    A standby folds the log all along (:meth:`Dispatcher.fold_forever`, run beside this) and waits
    for the lease; once it holds it, it binds the durable consumer (``bind()``) and consumes it as
    the only dispatcher does, and lets go of it when it stops leading (a standby holds no consumer:
    its readiness does not wait for a consumer it does not use).
    When the lease stops being active (the renew deadline passed without a renewal, or another
    replica took it), the writes stop: the Job write under way is the last (the gate is asked
    before each), the batch is not acked, and the work is cancelled within ``poll`` s, which is
    well inside the gap between the renew deadline and the lease duration, so before any other
    replica may take over. What was fetched and not acked is delivered again one ack wait after
    the last in-progress ack (:attr:`Dispatcher.progress_every`). Raises what the work raises
    but :class:`NotLeading`.
    """
    dispatcher.gate = lease.active
    while True:
        while not lease.active():
            await asyncio.sleep(poll)
        log.info("dispatcher_leading", lease=lease.key, identity=lease.identity)
        consumer = await bind()
        work = [asyncio.ensure_future(dispatcher.consume(consumer)), *(asyncio.ensure_future(run()) for run in also)]
        try:
            while lease.active() and not any(task.done() for task in work):
                await asyncio.sleep(poll)
        finally:
            await cancel_and_wait(work)
            with contextlib.suppress(BusError):
                await consumer.close()
        for task in work:
            if not task.cancelled() and task.exception() is not None:
                error = task.exception()
                if not isinstance(error, NotLeading):
                    assert error is not None
                    raise error
        log.warning("dispatcher_standing_by", lease=lease.key, identity=lease.identity)


async def standby_lease(
    bus: Bus, dispatcher: Dispatcher, settings: standby.StandbySettings
) -> tuple[standby.DeciderLease | None, Callable[[], Awaitable[DurableConsumer]]]:
    """On a NATS bus, the dispatcher's lease (key ``dispatcher.<partition>`` in KQ_LEASES) and how the
    holder binds the durable consumer: with its ack wait set to the lease duration, while the dispatcher
    marks what it holds in progress every retry period, so what a dead holder fetched and did not ack
    comes to the next holder about when it takes over. On another bus (in memory): no lease (None).
    Raises BusError, NotFoundError when the lease bucket is missing."""
    lease = await standby.open_lease(bus, role="dispatch", user=LEASE_USER, settings=settings)
    if lease is not None:
        dispatcher.progress_every = settings.retry_period

    async def bind() -> DurableConsumer:
        return await bind_decisions(
            bus, ack_wait=settings.lease_duration, set_ack_wait=True, pending_outcomes=dispatcher.write_objects
        )

    return lease, bind


async def bind_decisions(
    bus: Bus,
    *,
    name: str = "dispatcher",
    ack_wait: float = 30.0,
    set_ack_wait: bool = False,
    pending_outcomes: bool = True,
) -> carried.CarriedDecisions:
    """Bind the durable consumer ``name`` over :data:`DECISION_FILTERS` (an existing one's filter is brought to
    it: a dispatcher before event schema 17 read the per-workload subjects alone) and wrap it so each record's
    carried decisions are delivered one by one (:class:`carried.CarriedDecisions`; ``pending_outcomes``: its
    pending outcomes too, for their Events). ``ack_wait``, ``set_ack_wait``: as :meth:`Bus.durable`. Raises
    BusError."""
    inner = await bus.durable(
        name=name, subjects=DECISION_FILTERS, ack_wait=ack_wait, set_ack_wait=set_ack_wait, set_filter=True
    )
    return carried.CarriedDecisions(inner, pending_outcomes=pending_outcomes)


def observe(dispatcher: Dispatcher, bus: ObservedBus) -> None:
    """Tell the Health the observed ``bus`` carries of ``dispatcher``'s orphans and acks (its readiness
    then also asks :meth:`~kueue_es.services.dispatcher.settling.Settling.readiness`)."""
    dispatcher.on_orphan = bus.health.orphan_counter()
    dispatcher.settling.on_abandoned = bus.health.report_dispatch_acks(dispatcher.settling.readiness)


async def serve_dispatcher(
    *,
    nats_url: str,
    api: KubeApi | k8s_client.ApiClient,
    stop: asyncio.Event,
    qps: float | None = None,
    burst: int | None = None,
    connect: Callable[[str], Awaitable[Bus]] = nats_bus.connect,
    start: StartPoint | None = None,
    standby_settings: standby.StandbySettings | None = None,
) -> None:
    """Run the dispatcher until ``stop`` is set; ``qps``/``burst`` default to the environment
    (:func:`~kueue_es.services.dispatcher.kube_api.limiter_from_env`); ``connect``: how to get the bus;
    ``start``: a snapshot of the log to fold on from (kueue_es.snapshots), used only if it is of this log;
    ``standby_settings``: write only while holding the dispatcher's lease in KQ_LEASES, folding meanwhile
    (:func:`consume_while_leading`); the lease is released on the way out."""
    bus = await connect(nats_url)
    limiter = limiter_from_env(qps=qps, burst=burst)
    interval = queue_status_interval_from_env()
    dispatcher = Dispatcher(bus=bus, api=api, limiter=limiter, start=start, queue_status_interval=interval)
    if isinstance(bus, ObservedBus):  # the observed bus carries the Health it reports to
        observe(dispatcher, bus)
        bus.health.report_dispatch_backlog(dispatcher.backlog)
    lease = None
    if standby_settings is not None:
        lease, bind = await standby_lease(bus, dispatcher, standby_settings)
    if lease is None:
        consumer = await bind_decisions(bus)
    shares = {cls.label: round(share, 3) for cls, share in limiter.shares.items()}
    log.info(
        "service_started",
        qps=limiter.qps,
        burst=limiter.burst,
        shares=shares,
        queue_status_interval=interval,
        lease=lease.key if lease is not None else None,
        identity=lease.identity if lease is not None else None,
    )
    if lease is None:
        work = [dispatcher.consume(consumer), dispatcher.ungate_forever(), dispatcher.concurrent_admission_forever()]
    else:
        if isinstance(bus, ObservedBus):
            standby.observe(lease, bus.health, role="dispatch")
        work = [
            consume_while_leading(
                dispatcher, bind, lease, also=(dispatcher.ungate_forever, dispatcher.concurrent_admission_forever)
            ),
            lease.run(),
        ]
    try:
        await run_until_stopped(stop, dispatcher.fold_forever(), dispatcher.watch_pods(), *work)
    finally:
        if lease is not None:
            await lease.release()
        await bus.close()
        log.info(
            "service_stopped",
            applied=dispatcher.applied,
            failed=dispatcher.failed,
            object_writes=dispatcher.object_writes,
            object_failures=dispatcher.object_failures,
        )
