"""The dispatcher service: carry admission and eviction decisions out in Kubernetes.

A durable consumer (explicit ack) over the per-workload decisions delivers each
at least once, in order. For each, the pure :func:`kueue_es.services.dispatcher.core.plan`
says what to write to the Job (start an admitted Job, stop an evicted one); this
runner writes it with kubernetes-asyncio, records a DispatchApplied or
DispatchFailed result on the log (its Msg-Id is the decision's sequence, so a
redelivery records nothing new) and only then acks. A Job that is gone (404, or a
namesake with another UID) runs nothing: the runner logs the workload deleted
(ObjectDeleted, which releases its quota) and, for an eviction, WorkloadStopped
(Kueue: jobframework/reconciler.go, a missing job is not active).

It also keeps the Kubernetes objects Kueue's controllers keep, from the folded log
(:mod:`kueue_es.services.dispatcher.status`): for every workload made from a Job, the
``kueue.x-k8s.io/v1beta2`` Workload object (owner reference to the Job) and its
status (admission, conditions with Kueue's reasons and messages); and the status
of every ClusterQueue and LocalQueue (pending, reserving and admitted workloads,
flavorsReservation, flavorsUsage). All are server-side applied with the field
manager ``kueue-es``; the Workload objects before a batch's Job writes, the queue
status once after it. Writes are compared with the last state the server
returned (listed at start-up), so a redelivered decision, a restart or an
unchanged queue writes nothing. A write that fails with 5xx, 429, a conflict or
a broken connection is tried again at the next batch; another failure of a
Workload write is recorded as DispatchFailed (action ``SyncWorkload``). Every
write waits for the rate limiter (:class:`WriteLimiter`, QPS and burst as client-go's).

Topology-Aware Scheduling (SEMANTICS-ADVANCED A.12): a TopologyAssigned decision is
written into the Workload's ``status.admission.podSetAssignments[].topologyAssignment``;
a started job's TAS pod sets get the ``kueue.x-k8s.io/topology`` scheduling gate, the
``kueue.x-k8s.io/podset`` label and the ``kueue.x-k8s.io/workload`` annotation; and the
ungater (:meth:`Dispatcher.watch_pods`, :meth:`Dispatcher.ungate_forever`, pure core in
:mod:`kueue_es.services.dispatcher.ungater`) gives each gated pod of an Admitted workload its
domain's nodeSelector and removes the gate (a patch with the pod's resourceVersion as
precondition, retried on conflict).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog
from aiolimiter import AsyncLimiter

from kueue_es.events import codec, subjects, tas, types
from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus.base import Bus, Delivery, DurableConsumer
from kueue_es.jobframework import pods as pod_integration
from kueue_es.projections.cluster import ClusterState, WorkloadState
from kueue_es.services.dispatcher import core, kube_events, status, ungater
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import errors as kube_errors
from kueue_es.services.kube import resources
from kueue_es.services.runtime import run_until_stopped, wall_clock_ms

log = structlog.get_logger(__name__)

DECISION_FILTER = "kq.dec.*.wl.>"
FIELD_MANAGER = "kueue-es"
SYNC_WORKLOAD = "SyncWorkload"
JOB_REF = kube.ref_for("batch/v1", "Job")
JOBSET_REF = kube.ref_for(core.JOBSET_API, "JobSet")
POD_REF = kube.ref_for("v1", "Pod")

ObjectKey = tuple[str, str, str]  # (kind, namespace or "", name)


def _retryable(err: Exception) -> bool:
    """A failure worth trying again as it is: the server is busy or down, or the object moved under us."""
    if isinstance(err, kube_errors.ConnectionFailedError):
        return True
    return isinstance(err, kube_errors.ApiError) and (err.status >= 500 or err.status in (409, 429))


# -- the write rate limit ---------------------------------------------------------------------
#
# Kueue's manager talks to the API server through client-go, whose client-side limiter
# is a token bucket: ``burst`` requests may go at once, then ``qps`` a second (Kueue's
# Configuration ``clientConnection`` defaults: QPS 50, burst 100). Every Kubernetes write
# of the dispatcher (Job patches, Workload objects and their status, ClusterQueue and
# LocalQueue status) first takes a token from one WriteLimiter: aiolimiter's leaky bucket
# with capacity ``burst`` draining at ``qps`` a second, which admits exactly what a token
# bucket of that size refilled at that rate admits, so N writes take at least
# ``(N - burst) / qps`` seconds. serve_dispatcher(qps=..., burst=...) sets it; without
# those, the environment variables KUEUE_ES_DISPATCHER_QPS and KUEUE_ES_DISPATCHER_BURST.

DEFAULT_QPS = 50.0
DEFAULT_BURST = 100
QPS_ENV = "KUEUE_ES_DISPATCHER_QPS"
BURST_ENV = "KUEUE_ES_DISPATCHER_BURST"


@dataclass
class WriteLimiter:
    """At most ``burst`` writes at once, then ``qps`` writes a second; ``await limiter.acquire()`` before each write.

    Raises ValueError for a ``qps`` or ``burst`` that is not positive.
    """

    qps: float = DEFAULT_QPS
    burst: int = DEFAULT_BURST
    writes: int = 0
    _bucket: AsyncLimiter = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.qps > 0 or self.burst < 1:
            raise ValueError(
                f"the write rate limit needs qps > 0 and burst >= 1, not qps={self.qps} burst={self.burst}"
            )
        self._bucket = AsyncLimiter(max_rate=self.burst, time_period=self.burst / self.qps)

    async def acquire(self) -> None:
        """Wait for a token; counts the write."""
        await self._bucket.acquire()
        self.writes += 1


def limiter_from_env(
    environ: Mapping[str, str] = os.environ, *, qps: float | None = None, burst: int | None = None
) -> WriteLimiter:
    """The limiter for ``qps``/``burst``, each defaulting to its environment variable, then to Kueue's default.

    Raises ValueError naming the variable when one is not a number.
    """
    if qps is None:
        qps = _number(environ, QPS_ENV, float, DEFAULT_QPS)
    if burst is None:
        burst = int(_number(environ, BURST_ENV, int, DEFAULT_BURST))
    return WriteLimiter(qps=qps, burst=burst)


def _number(environ: Mapping[str, str], name: str, kind: type[float] | type[int], default: float) -> float:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return kind(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a valid {kind.__name__}") from None


class Dispatcher:
    """Folds the log (to know flavors, jobs and queues) and executes decisions from a durable consumer.

    ``limiter`` rate-limits every write (default: Kueue's QPS 50, burst 100), the
    Kubernetes Events on Workloads with a second limiter of the same size
    (:attr:`event_limiter`); ``write_objects`` False leaves Workload objects, their
    Events and queue status alone (only Jobs are written).
    """

    def __init__(
        self,
        *,
        bus: Bus,
        api: Any,
        cluster: str = subjects.DEFAULT_CLUSTER,
        limiter: WriteLimiter | None = None,
        field_manager: str = FIELD_MANAGER,
        write_objects: bool = True,
    ) -> None:
        self.bus, self.api, self.cluster = bus, api, cluster
        self.view = core.DispatchState(track_objects=write_objects)
        self._folded = asyncio.Condition()
        self.limiter = limiter if limiter is not None else WriteLimiter()
        self.field_manager = field_manager
        self.write_objects = write_objects
        self.objects: dict[ObjectKey, dict[str, Any]] = {}  # the server's last answer for each object we keep
        self.absent: set[ObjectKey] = set()  # queues the API server does not have (until observed again)
        self._gated = False  # consume() writes objects only once the fold has caught up with the log
        self._caught_up = False
        self.applied = 0
        self.failed = 0
        self.object_writes = 0
        self.object_failures = 0
        # Kubernetes Events: a budget of their own, of the same size (Kueue's event recorder is a
        # second client built from the same QPS and burst)
        self.event_limiter = type(self.limiter)(qps=self.limiter.qps, burst=self.limiter.burst)
        self.events_written = 0
        self._last_warning: dict[str, tuple[str, str]] = {}  # workload -> its last pending Event
        self._job_events: list[tuple[int, kube_events.KubeEvent]] = []  # a batch's job Events, written after it
        # the TAS ungater: the pods carrying the pod set label, and the workloads whose pods may need ungating
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self._ungate_dirty: dict[str, None] = {}
        self._ungate_wakeup = asyncio.Event()
        self.ungated = 0

    @property
    def state(self) -> ClusterState:
        """The cluster as folded so far."""
        return self.view.cluster

    async def fold_forever(self) -> None:
        """Keep the state folded up to the end of the log."""
        async for message in self.bus.read(subjects=(subjects.FACTS, subjects.DECISIONS), start_seq=1):
            try:
                event = codec.decode(message.data)
            except codec.DecodeError as err:  # skipped, as every service skips it; its sequence still counts
                log.warning("event_undecodable", seq=message.seq, subject=message.subject, error=str(err))
                self.view.cluster.last_seq = max(self.view.cluster.last_seq, message.seq)
            else:
                core.fold(self.view, event, seq=message.seq)
                self._observed(event)
                if isinstance(event, types.WorkloadAdmitted | types.TopologyAssigned):
                    self._mark_ungate(event.workload.key)
            self._caught_up = self._caught_up or message.pending == 0
            async with self._folded:
                self._folded.notify_all()

    def _observed(self, event: types.Event) -> None:
        """A queue seen (again) in the cluster may now take its status."""
        match event:
            case types.ClusterQueueObserved(cluster_queue=obj):
                self.absent.discard(("ClusterQueue", "", obj.metadata.name))
            case types.LocalQueueObserved(local_queue=obj):
                self.absent.discard(("LocalQueue", obj.metadata.namespace, obj.metadata.name))

    async def _wait_folded(self, seq: int) -> None:
        async with self._folded:
            await self._folded.wait_for(lambda: self.state.last_seq >= seq)

    FETCH_BATCH = 100
    """Decisions taken per fetch. A batch's acks go out when it is done, and the next batch is
    fetched meanwhile: at most two batches' Job writes (4 s at 50 writes/s) stand between a
    delivery and its ack, well inside the consumer's 30 s ack wait."""

    async def consume(self, consumer: DurableConsumer) -> None:
        """Fetch, execute and ack decisions forever; objects are brought up to date after every fetch.

        The next fetch is under way while a batch is handled (one fetch at a time, batches
        handled one after the other in delivery order), so a batch does not wait a round
        trip to the server after the one before: on a busy machine that wait was most of
        the time from an admission to its Job write.
        """
        self._gated = True  # not before the fold reaches the end: it would write the past on the way
        await self.prime()
        upcoming = asyncio.ensure_future(consumer.fetch(batch=self.FETCH_BATCH, timeout=1.0))
        try:
            while True:
                deliveries = await upcoming
                upcoming = asyncio.ensure_future(consumer.fetch(batch=self.FETCH_BATCH, timeout=1.0))
                await self.handle_batch(consumer, deliveries)
        finally:
            upcoming.cancel()
            with contextlib.suppress(BaseException):
                await upcoming

    async def handle(self, consumer: DurableConsumer, delivery: Delivery) -> None:
        """Execute one delivered decision; ack when its result is on the log."""
        await self.handle_batch(consumer, [delivery])

    async def handle_batch(self, consumer: DurableConsumer, deliveries: list[Delivery]) -> None:
        """Execute a batch of delivered decisions (possibly none): Workload objects first, then each decision's
        Job write and result, then the acks, then the queues' status, once.

        Results go out pipelined: each decision's Job write waits for the one before (the
        write limiter keeps its order), but its result is published without waiting for
        the JetStream ack of the previous result (one connection keeps them in order on
        the log), and the batch's acks go out together once every result is stored. A
        decision that needs more facts after its result (a gone Job, a job that cannot
        start) first waits for the results before it, so the log's order is the
        one-at-a-time order. A failure stops the batch with nothing more acked:
        redelivery repeats what was not recorded (the results' Msg-Ids make a repeat a
        duplicate)."""
        decoded: list[tuple[Delivery, types.Event]] = []
        done: list[Delivery] = []  # acked once the results published before are stored
        for delivery in deliveries:
            try:
                decoded.append((delivery, codec.decode(delivery.message.data)))
            except codec.DecodeError as err:
                log.warning("decision_undecodable", seq=delivery.message.seq, error=str(err))
                done.append(delivery)
        if decoded:
            await self._wait_folded(max(d.message.seq for d, _ in decoded))
        await self.sync_workloads()
        inflight: list[asyncio.Future[Any]] = []
        try:
            for delivery, event in decoded:
                await self._execute(consumer, delivery, event, inflight=inflight, done=done)
            await self._settle(inflight)
        except BaseException:
            for future in inflight:
                future.cancel()
            await asyncio.gather(*inflight, return_exceptions=True)
            raise
        for delivery in done:
            await consumer.ack(delivery)
        await self.record_events([(d.message.seq, event) for d, event in decoded])
        await self.sync_queues()

    async def record_events(self, decisions: list[tuple[int, types.Event]]) -> None:
        """Write the Kubernetes Events Kueue records on a Workload for these decisions (``(log
        sequence, decision)``, :mod:`.kube_events`), for the workloads whose Workload object the
        dispatcher writes. Best effort, as Kueue's event recorder: a failed write is logged and
        dropped. A Warning (a pending reason) is written when it differs from the workload's
        last one, not for every re-evaluation (Kueue's recorder folds repeats into a series). An
        Event's name comes from the decision's sequence, so a redelivered decision writes nothing
        new (AlreadyExists). Events have their own write budget (:attr:`event_limiter`), as
        Kueue's event broadcaster has its own client."""
        job_events, self._job_events = self._job_events, []
        if not self._ready():
            return
        for seq, item in job_events:  # the jobs' own: CreatedWorkload, Started, Stopped (jobframework)
            suffix = f"{seq:x}.job" if seq else "created"
            await self._write_event(item, name=f"{item.workload.name}.{suffix}")
        for seq, decision in decisions:
            records = kube_events.for_decision(self.state, decision, self.view.records.get(_workload_key(decision)))
            for index, item in enumerate(records):
                key = item.workload.key
                wl = self.state.workloads.get(key)
                if wl is None or not status.is_job_workload(wl):
                    continue
                if item.type == "Warning":
                    if self._last_warning.get(key) == (item.reason, item.message):
                        continue
                    self._last_warning[key] = (item.reason, item.message)
                elif item.reason == "QuotaReserved":
                    self._last_warning.pop(key, None)  # pending again later is news again
                await self._write_event(item, name=f"{item.workload.name}.{seq:x}.{index}")

    async def _write_event(self, item: kube_events.KubeEvent, *, name: str) -> None:
        namespace = item.workload.namespace
        uid = ""
        if item.job is None:  # about the Workload object: the UID the server gave it
            stored = self.objects.get(("Workload", namespace, item.workload.name)) or {}
            uid = (stored.get("metadata") or {}).get("uid", "")
        body = kube_events.event_object(item, name=name, uid=uid)
        await self.event_limiter.acquire()
        try:
            await kube.create_object(self.api, resources.EVENTS, namespace=namespace, body=body)
        except kube_errors.ConflictError:
            pass  # written before: a redelivered decision
        except (kube_errors.ApiError, kube_errors.ConnectionFailedError) as err:
            log.warning("event_write_failed", workload=item.workload.key, reason=item.reason, error=str(err))
        else:
            self.events_written += 1

    @staticmethod
    async def _settle(inflight: list[asyncio.Future[Any]]) -> None:
        """Wait until every result published so far is stored; raises the first failure."""
        if inflight:
            pending = list(inflight)
            inflight.clear()
            await asyncio.gather(*pending)

    # -- the Job writes of decisions -----------------------------------------------------------

    async def _execute(
        self,
        consumer: DurableConsumer,
        delivery: Delivery,
        event: types.Event,
        *,
        inflight: list[asyncio.Future[Any]],
        done: list[Delivery],
    ) -> None:
        message = delivery.message
        action = core.plan(self.view, event, seq=message.seq)
        if action is None:
            done.append(delivery)
            return
        name = _action_name(action)
        try:
            result = await self._carry_out(action, seq=message.seq)
        except (kube_errors.ApiError, kube_errors.ConnectionFailedError) as err:
            if not isinstance(err, kube_errors.ApiError) or err.status >= 500 or err.status == 429:
                log.warning("dispatch_retry", seq=message.seq, action=name, error=str(err))
                await consumer.nak(delivery, delay=min(2.0**delivery.attempt, 30.0))
                return
            result = types.DispatchFailed(
                workload=action.workload,
                decision_seq=message.seq,
                action=name,
                status=err.status,
                reason=err.reason,
                message=str(err),
            )
        publish = self.bus.publish(
            subjects.message(
                result,
                subject=subjects.dispatch_subject(action.workload, self.cluster),
                msg_id=f"disp:{self.cluster}:{message.seq}",
            )
        )
        gone = isinstance(result, types.DispatchFailed) and result.status == 404
        if gone or isinstance(action, core.FailStart):
            await self._settle(inflight)
            await publish
            if gone:
                await self._report_gone(action, seq=message.seq)
            if isinstance(action, core.FailStart):
                await self._report_failed_start(action, seq=message.seq)
        else:
            inflight.append(asyncio.ensure_future(publish))
        if isinstance(result, types.DispatchApplied):
            self.applied += 1
            if isinstance(action, core.StartJob | core.StartJobSet | core.StopJob | core.StopJobSet):
                kind = "JobSet" if isinstance(action, core.StartJobSet | core.StopJobSet) else "Job"
                started = isinstance(action, core.StartJob | core.StartJobSet)
                job_event = kube_events.for_job_write(
                    kind, action.name, action.uid, started=started, decision=event, at_ms=_decision_ms(event)
                )
                if job_event is not None:
                    self._job_events.append((message.seq, job_event))
        else:
            self.failed += 1
        done.append(delivery)

    async def _carry_out(self, action: core.Action, *, seq: int) -> types.DispatchApplied | types.DispatchFailed:
        match action:
            case core.StartJob():
                return await self._start_job(action, seq=seq)
            case core.StopJob():
                return await self._stop_job(action, seq=seq)
            case core.StartJobSet() | core.StopJobSet():
                return await self._write_jobset(action, seq=seq)
            case core.StartPods():
                return await self._start_pods(action, seq=seq)
            case core.StopPods():
                return await self._stop_pods(action, seq=seq)
            case core.FailStart():
                log.warning("job_not_started", workload=action.workload.key, reason=action.message, seq=seq)
                return types.DispatchFailed(
                    workload=action.workload,
                    decision_seq=seq,
                    action="StartJob",
                    status=422,
                    reason="FailedToStart",
                    message=action.message,
                )
        raise AssertionError(f"unknown action {action!r}")  # pragma: no cover

    async def _same_job(
        self,
        action: core.StartJob | core.StopJob | core.StartJobSet | core.StopJobSet,
        *,
        seq: int,
        ref: resources.ResourceRef = JOB_REF,
    ) -> dict[str, Any] | types.DispatchFailed:
        """The action's Job (or JobSet) as the API server has it, or DispatchFailed 404 when it is gone
        or a namesake with another UID took its place."""
        target = f"{ref.kind} {action.namespace}/{action.name}"
        try:
            job = await kube.get_object(self.api, ref, namespace=action.namespace, name=action.name)
        except kube_errors.NotFoundError as err:
            return self._gone(action, seq=seq, message=str(err))
        uid = (job.get("metadata") or {}).get("uid", "")
        if action.uid and uid and uid != action.uid:
            return self._gone(action, seq=seq, message=f"{target} has UID {uid}, not {action.uid}: it was re-created")
        return job

    async def _start_job(self, action: core.StartJob, *, seq: int) -> types.DispatchApplied | types.DispatchFailed:
        """Unsuspend the admitted workload's Job with the flavors' node labels and tolerations.

        A Job that is gone, or a namesake with another UID, is a DispatchFailed 404.
        """
        ref, target = JOB_REF, f"Job {action.namespace}/{action.name}"
        job = await self._same_job(action, seq=seq)
        if isinstance(job, types.DispatchFailed):
            return job
        pod_spec = ((job.get("spec") or {}).get("template") or {}).get("spec") or {}
        patch = action.patch(
            current_tolerations=pod_spec.get("tolerations") or [], current_gates=pod_spec.get("schedulingGates") or []
        )
        if action.uid:
            patch["metadata"]["uid"] = action.uid  # a precondition: a namesake created meanwhile is refused
        await self.limiter.acquire()
        await kube.patch_object(self.api, ref, namespace=action.namespace, name=action.name, patch=patch)
        log.info("job_started", job=f"{action.namespace}/{action.name}", workload=action.workload.key, seq=seq)
        return types.DispatchApplied(
            workload=action.workload,
            decision_seq=seq,
            action="StartJob",
            target=target,
            node_selector=action.node_selector,
        )

    async def _stop_job(self, action: core.StopJob, *, seq: int) -> types.DispatchApplied | types.DispatchFailed:
        """Suspend the evicted workload's Job, restore its template and mark it (Kueue job_controller.go Stop).

        A Job that is gone, or a namesake with another UID, is a DispatchFailed 404.
        """
        ref, target = JOB_REF, f"Job {action.namespace}/{action.name}"
        job = await self._same_job(action, seq=seq)
        if isinstance(job, types.DispatchFailed):
            return job
        pod_spec = ((job.get("spec") or {}).get("template") or {}).get("spec") or {}
        await self.limiter.acquire()
        await kube.patch_object(
            self.api, ref, namespace=action.namespace, name=action.name, patch=action.patch(current_pod_spec=pod_spec)
        )
        log.info("job_stopped", job=f"{action.namespace}/{action.name}", workload=action.workload.key, seq=seq)
        return types.DispatchApplied(workload=action.workload, decision_seq=seq, action="Evict", target=target)

    async def _write_jobset(
        self, action: core.StartJobSet | core.StopJobSet, *, seq: int
    ) -> types.DispatchApplied | types.DispatchFailed:
        """Unsuspend a JobSet with its templates started, or suspend it with them given back (Kueue's jobset
        integration); a JobSet that is gone, or a namesake, is a DispatchFailed 404."""
        target = f"JobSet {action.namespace}/{action.name}"
        jobset = await self._same_job(action, seq=seq, ref=JOBSET_REF)
        if isinstance(jobset, types.DispatchFailed):
            return jobset
        await self.limiter.acquire()
        await kube.patch_object(
            self.api, JOBSET_REF, namespace=action.namespace, name=action.name, patch=action.patch(jobset)
        )
        starting = isinstance(action, core.StartJobSet)
        log.info("jobset_started" if starting else "jobset_stopped", jobset=target, workload=action.workload.key)
        selector = {k: v for info in action.pod_sets for k, v in info.node_selector.items()} if starting else {}
        return types.DispatchApplied(
            workload=action.workload,
            decision_seq=seq,
            action=_action_name(action),
            target=target,
            node_selector=dict(sorted(selector.items())),
        )

    async def _pods_of(self, action: core.StartPods | core.StopPods) -> list[dict[str, Any]]:
        """The pods of a Pod workload: the one pod, or every pod of the group in the namespace."""
        if not action.group:
            try:
                return [await kube.get_object(self.api, POD_REF, namespace=action.namespace, name=action.pod_name)]
            except kube_errors.NotFoundError:
                return []
        items, _ = await kube.list_objects(self.api, POD_REF, namespace=action.namespace)
        return sorted(
            (pod for pod in items if pod_integration.group_name(pod) == action.group),
            key=lambda pod: str((pod.get("metadata") or {}).get("name") or ""),
        )

    def _pods_target(self, action: core.StartPods | core.StopPods) -> str:
        return (
            f"Pod group {action.namespace}/{action.group}"
            if action.group
            else f"Pod {action.namespace}/{action.pod_name}"
        )

    async def _start_pods(self, action: core.StartPods, *, seq: int) -> types.DispatchApplied | types.DispatchFailed:
        """Ungate the workload's pods with their pod set's node selector and tolerations (pod_controller.go Run).

        No pod left (or the single pod replaced by a namesake) is a DispatchFailed 404.
        """
        target = self._pods_target(action)
        members = await self._pods_of(action)
        uid = (members[0].get("metadata") or {}).get("uid", "") if members and not action.group else ""
        if not members or (action.uid and uid and uid != action.uid):
            return self._gone(action, seq=seq, message=f"{target} is gone")
        for pod in members:
            pod_set = pod_integration.role_hash(pod) if action.group else "main"
            patch = action.patch(pod, pod_set=pod_set)
            if patch is None:
                continue
            meta = pod.get("metadata") or {}
            await self.limiter.acquire()
            try:
                await kube.patch_object(
                    self.api, POD_REF, namespace=action.namespace, name=meta.get("name", ""), patch=patch
                )
            except kube_errors.NotFoundError:
                continue  # deleted meanwhile: the watcher sees the group change
        log.info("pods_started", pods=target, workload=action.workload.key, seq=seq)
        selector = {k: v for info in action.pod_sets for k, v in info.node_selector.items()}
        return types.DispatchApplied(
            workload=action.workload,
            decision_seq=seq,
            action="StartJob",
            target=target,
            node_selector=dict(sorted(selector.items())),
        )

    async def _stop_pods(self, action: core.StopPods, *, seq: int) -> types.DispatchApplied | types.DispatchFailed:
        """Mark every pod of the workload with the eviction and delete those that run (pod_controller.go Stop).

        The watcher reports WorkloadStopped once no marked pod runs. No pod left is a DispatchFailed 404.
        """
        target = self._pods_target(action)
        members = await self._pods_of(action)
        if not members:
            return self._gone(action, seq=seq, message=f"{target} is gone")
        for pod in members:
            name = (pod.get("metadata") or {}).get("name", "")
            try:
                await self.limiter.acquire()
                await kube.patch_object(self.api, POD_REF, namespace=action.namespace, name=name, patch=action.mark())
                if not pod_integration.is_gated(pod) and not pod_integration.is_terminated(pod):
                    await self.limiter.acquire()
                    await kube.delete_object(self.api, POD_REF, namespace=action.namespace, name=name)
            except kube_errors.NotFoundError:
                continue
        log.info("pods_stopped", pods=target, workload=action.workload.key, seq=seq)
        return types.DispatchApplied(workload=action.workload, decision_seq=seq, action="Evict", target=target)

    async def _report_failed_start(self, action: core.FailStart, *, seq: int) -> None:
        """The job cannot start: Kueue finishes its workload with reason FailedToStart (reconciler.go)."""
        finished = types.WorkloadFinished(
            workload=action.workload,
            succeeded=False,
            reason="FailedToStart",
            message=action.message,
            at_ms=wall_clock_ms(),
        )
        await self.bus.publish(subjects.fact_message(finished, version=f"disp-{seq}"))

    def _gone(self, action: core.Action, *, seq: int, message: str) -> types.DispatchFailed:
        name = _action_name(action)
        log.info("job_gone", target=_target_name(action), workload=action.workload.key, seq=seq)
        return types.DispatchFailed(
            workload=action.workload, decision_seq=seq, action=name, status=404, reason="NotFound", message=message
        )

    async def _report_gone(self, action: core.Action, *, seq: int) -> None:
        """The workload's Job is gone, so nothing runs and the workload is gone with it.

        For an eviction, WorkloadStopped with the Msg-Id the watcher would give this
        eviction's stop (``convert.stop_version``), so it is reported once; for every
        action, ObjectDeleted of the workload (its UID, so a re-created namesake is not
        touched), which releases its quota. Msg-Ids carry the decision's sequence, so a
        redelivery publishes nothing new.
        """
        if isinstance(action, core.StopJob | core.StopJobSet | core.StopPods):
            stopped = types.WorkloadStopped(workload=action.workload, reason=action.reason, at_ms=wall_clock_ms())
            await self.bus.publish(subjects.fact_message(stopped, version=f"evict-{seq}"))
        ref = action.workload
        deleted = types.ObjectDeleted(kind="Workload", namespace=ref.namespace, name=ref.name, uid=ref.uid)
        await self.bus.publish(subjects.fact_message(deleted, version=f"disp-{seq}"))

    # -- the TAS ungater ---------------------------------------------------------------------------

    def _mark_ungate(self, key: str) -> None:
        self._ungate_dirty[key] = None
        self._ungate_wakeup.set()

    async def watch_pods(self) -> None:
        """Keep the pods that carry the pod set label (started pods of a workload) and wake the ungater for
        their workloads (cancel to stop)."""
        async for item in kube.watch_objects(self.api, POD_REF, label_selector=core.PODSET_LABEL):
            if isinstance(item, kube.Resynced):
                self.pods = {_pod_key(pod): pod for pod in item.objects}
                for pod in item.objects:
                    self._pod_changed(pod)
            elif item.type == "DELETED":
                self.pods.pop(_pod_key(item.object), None)
            else:
                self.pods[_pod_key(item.object)] = item.object
                self._pod_changed(item.object)

    def _pod_changed(self, pod: dict[str, Any]) -> None:
        workload = ((pod.get("metadata") or {}).get("annotations") or {}).get(core.WORKLOAD_ANNOTATION)
        if workload and ungater.is_gated(pod):
            self._mark_ungate(f"{_pod_key(pod)[0]}/{workload}")

    async def ungate_forever(self, *, retry_seconds: float = 1.0) -> None:
        """Ungate the gated pods of Admitted TAS workloads whenever a pod or the workload changes (cancel to stop)."""
        async with self._folded:  # not on a half-folded past: a workload admitted then may be evicted since
            await self._folded.wait_for(lambda: self._caught_up)
        while True:
            await self._ungate_wakeup.wait()
            self._ungate_wakeup.clear()
            if not await self.ungate_dirty():
                await asyncio.sleep(retry_seconds)  # a write failed: the workload stays dirty

    async def ungate_dirty(self) -> bool:
        """Ungate what the dirty workloads need now; False when a write must be tried again."""
        done = True
        taken, self._ungate_dirty = list(self._ungate_dirty), {}
        for key in taken:
            try:
                await self._ungate(key)
            except (kube_errors.ApiError, kube_errors.ConnectionFailedError) as err:
                log.warning("ungate_retry", workload=key, error=str(err))
                self._mark_ungate(key)
                done = False
        return done

    def _topology_pod_sets(self, key: str) -> list[ungater.PodSetTopology]:
        """The pod sets of an Admitted workload with a topology assignment (Kueue IsAdmittedByTAS), else []."""
        wl = self.state.workloads.get(key)
        record = self.view.records.get(key)
        if wl is None or wl.gone or not wl.admitted or wl.reservation is None or record is None:
            return []
        own = {ps.name: ps for ps in wl.workload.spec.pod_sets}
        out = []
        for psa in wl.reservation.pod_set_assignments:
            ta = record.topology.get(psa.name)
            if ta is None:
                continue
            request = own[psa.name].topology_request if psa.name in own else None
            out.append(
                ungater.PodSetTopology(name=psa.name, count=psa.count, assignment=tas.decode(ta), request=request)
            )
        return out

    async def _ungate(self, key: str) -> None:
        """Give the gated pods of workload ``key`` their domains (topology_ungater.go Reconcile)."""
        pod_sets = self._topology_pod_sets(key)
        if not pod_sets:
            return
        namespace, _, name = key.partition("/")
        bounds = ungater.rank_bounds(pod_sets)
        for pod_set in pod_sets:
            pods = sorted(
                (
                    pod
                    for (ns, _), pod in self.pods.items()
                    if ns == namespace
                    and ((pod.get("metadata") or {}).get("annotations") or {}).get(core.WORKLOAD_ANNOTATION) == name
                    and ((pod.get("metadata") or {}).get("labels") or {}).get(core.PODSET_LABEL) == pod_set.name
                    and not pod_integration.is_terminated(pod)
                ),
                key=lambda pod: str((pod.get("metadata") or {}).get("name") or ""),
            )
            offset, max_rank = bounds[pod_set.name]
            try:
                plan = ungater.plan_pod_set(pod_set, pods, offset=offset, max_rank=max_rank)
            except ValueError as err:
                log.warning("ungate_failed", workload=key, pod_set=pod_set.name, error=str(err))
                continue
            by_name = {str((p.get("metadata") or {}).get("name") or ""): p for p in pods}
            for step in plan:
                await self._ungate_pod(by_name[step.name], step, workload=key)

    async def _ungate_pod(self, pod: dict[str, Any], step: ungater.Ungate, *, workload: str) -> None:
        """Remove the topology gate and add the domain's nodeSelector, if the pod is still as listed."""
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        gates = core.without_gates(list(spec.get("schedulingGates") or []), [core.TOPOLOGY_GATE])
        patch = {
            "metadata": {"resourceVersion": meta.get("resourceVersion")},  # a precondition: 409 if it changed
            "spec": {"schedulingGates": gates or None, "nodeSelector": step.node_selector},
        }
        await self.limiter.acquire()
        try:
            stored = await kube.patch_object(
                self.api, POD_REF, namespace=meta.get("namespace"), name=step.name, patch=patch
            )
        except kube_errors.NotFoundError:
            self.pods.pop(_pod_key(pod), None)
            return
        self.pods[_pod_key(stored)] = stored
        self.ungated += 1
        log.info(
            "pod_ungated",
            pod=f"{meta.get('namespace')}/{step.name}",
            workload=workload,
            node_selector=step.node_selector,
        )

    # -- Workload objects and queue status -----------------------------------------------------

    async def prime(self) -> None:
        """Learn what the server holds of the objects we keep, so unchanged ones are not written again."""
        if not self.write_objects:
            return
        kinds = (
            (resources.WORKLOADS, None),  # pod groups' Workloads have no job-uid label
            (resources.CLUSTER_QUEUES, None),
            (resources.LOCAL_QUEUES, None),
        )
        for ref, selector in kinds:
            try:
                items, _ = await kube.list_objects(self.api, ref, label_selector=selector)
            except (kube_errors.ApiError, kube_errors.ConnectionFailedError) as err:
                log.warning("prime_failed", kind=ref.kind, error=str(err))
                continue
            for item in items:
                meta = item.get("metadata") or {}
                namespace = meta.get("namespace", "") if ref.namespaced else ""
                self.objects[(ref.kind, namespace, meta.get("name", ""))] = item

    def _ready(self) -> bool:
        return self.write_objects and (self._caught_up or not self._gated)

    async def sync_workloads(self) -> None:
        """Bring the Workload object and status of every changed workload made from a Job up to date."""
        if not self._ready():
            return
        for key, seq in self.view.take_dirty_workloads().items():
            wl = self.state.workloads.get(key)
            namespace, _, name = key.partition("/")
            try:
                if wl is None or wl.deleted_seq:
                    await self._delete_workload(namespace, name)
                    continue
                if not status.is_job_workload(wl):
                    continue
                await self._sync_workload(key, wl)
            except (kube_errors.ApiError, kube_errors.ConnectionFailedError) as err:
                if _retryable(err):
                    log.warning("workload_sync_retry", workload=key, error=str(err))
                    self.view.dirty_workloads.setdefault(key, seq)
                    continue
                assert isinstance(err, kube_errors.ApiError)
                if wl is None or wl.deleted_seq:
                    self.objects.pop(("Workload", namespace, name), None)  # not ours to delete, it seems
                    log.warning("workload_delete_failed", workload=key, status=err.status, error=str(err))
                else:
                    await self._sync_failed(wl, seq=seq, err=err)

    async def _sync_workload(self, key: str, wl: WorkloadState) -> None:
        meta = wl.workload.metadata
        ident: ObjectKey = ("Workload", meta.namespace, meta.name)
        desired = status.workload_object(wl, self.state, self.view.records.get(key))
        stored = self.objects.get(ident)
        if stored is None or not _contains(stored, desired) or _uid_owner(stored) != _uid_owner(desired):
            created = stored is None
            stored = self.objects[ident] = await self._apply(resources.WORKLOADS, desired)
            created_event = kube_events.for_created_workload(wl.workload) if created else None
            if created_event is not None:
                self._job_events.append((0, created_event))
        generation = int((stored.get("metadata") or {}).get("generation") or 0)
        wanted = status.workload_status(self.view.records.get(key), generation=generation)
        if _managed(stored, status.WORKLOAD_STATUS_FIELDS) != wanted:
            body = {**_identity(desired), "status": wanted}
            self.objects[ident] = await self._apply(resources.WORKLOADS, body, subresource="status")

    async def _delete_workload(self, namespace: str, name: str) -> None:
        """The Job is gone: so is its Workload object. A real cluster's garbage collector deletes it (owner
        reference); the emulator has none. Only an object we wrote or listed is deleted, once."""
        ident: ObjectKey = ("Workload", namespace, name)
        if ident not in self.objects:
            return
        await self.limiter.acquire()
        try:
            await kube.delete_object(self.api, resources.WORKLOADS, namespace=namespace, name=name)
        except kube_errors.NotFoundError:
            pass
        else:
            self.object_writes += 1
        self.objects.pop(ident, None)

    async def _sync_failed(self, wl: WorkloadState, *, seq: int, err: kube_errors.ApiError) -> None:
        self.object_failures += 1
        log.warning("workload_sync_failed", workload=wl.workload.key, status=err.status, error=str(err))
        failed = types.DispatchFailed(
            workload=wl.ref,
            decision_seq=seq,
            action=SYNC_WORKLOAD,
            status=err.status,
            reason=err.reason,
            message=str(err),
        )
        await self.bus.publish(
            subjects.message(
                failed,
                subject=subjects.dispatch_subject(wl.ref, self.cluster),
                msg_id=f"disp:{self.cluster}:{seq}:{SYNC_WORKLOAD}",
            )
        )

    async def sync_queues(self) -> None:
        """Write the status of every ClusterQueue and LocalQueue whose counts or usage changed (once each)."""
        if not self._ready():
            return
        dirty = self.view.take_dirty_queues()
        feeding = status.local_queues_by_cluster_queue(self.state) if dirty else {}
        for ident in dirty:
            kind, namespace, name = ident
            if kind == "ClusterQueue" and name in self.state.cluster_queues:
                ref, wanted = resources.CLUSTER_QUEUES, status.cluster_queue_status(self.state, name, feeding=feeding)
            elif kind == "LocalQueue" and (namespace, name) in self.state.local_queues:
                ref, wanted = resources.LOCAL_QUEUES, status.local_queue_status(self.state, namespace, name)
            else:
                self.objects.pop(ident, None)  # deleted, or a queue no object names
                continue
            stored = self.objects.get(ident)
            if ident in self.absent or (stored is not None and _managed(stored, status.QUEUE_STATUS_FIELDS) == wanted):
                continue
            metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
            body = {"apiVersion": ref.api_version, "kind": ref.kind, "metadata": metadata, "status": wanted}
            try:
                self.objects[ident] = await self._apply(ref, body, subresource="status")
            except kube_errors.NotFoundError:
                log.info("queue_not_in_cluster", kind=kind, namespace=namespace, name=name)
                self.absent.add(ident)
            except (kube_errors.ApiError, kube_errors.ConnectionFailedError) as err:
                if _retryable(err):
                    self.view.dirty_queues.setdefault(ident)
                self.object_failures += 1
                log.warning("queue_status_failed", kind=kind, namespace=namespace, name=name, error=str(err))

    async def _apply(self, ref: resources.ResourceRef, body: dict[str, Any], *, subresource: str | None = None) -> Any:
        meta = body["metadata"]
        await self.limiter.acquire()
        stored = await kube.apply_object(
            self.api,
            ref,
            namespace=meta.get("namespace"),
            name=meta["name"],
            body=body,
            field_manager=self.field_manager,
            subresource=subresource,
        )
        self.object_writes += 1
        return stored


def _decision_ms(decision: types.Event) -> int:
    at_ms = getattr(decision, "at_ms", 0)
    return at_ms if isinstance(at_ms, int) else 0


def _workload_key(decision: types.Event) -> str:
    ref = getattr(decision, "workload", None)
    return ref.key if isinstance(ref, types.WorkloadRef) else ""


def _pod_key(pod: dict[str, Any]) -> tuple[str, str]:
    meta = pod.get("metadata") or {}
    return str(meta.get("namespace") or "default"), str(meta.get("name") or "")


def _action_name(action: core.Action) -> str:
    """``StartJob`` or ``Evict``, whatever the job kind (the DispatchApplied/Failed action)."""
    return "Evict" if isinstance(action, core.StopJob | core.StopJobSet | core.StopPods) else "StartJob"


def _target_name(action: core.Action) -> str:
    name = getattr(action, "name", "") or getattr(action, "group", "") or getattr(action, "pod_name", "")
    return f"{action.namespace}/{name}"


def _identity(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
    }


def _managed(obj: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    """The part of ``obj``'s status the dispatcher writes."""
    current = obj.get("status") or {}
    return {key: current[key] for key in fields if key in current}


def _contains(stored: Any, wanted: Any) -> bool:
    """Whether every field of ``wanted`` has that value in ``stored`` (maps compared by key, the rest whole)."""
    if isinstance(wanted, dict):
        return isinstance(stored, dict) and all(k in stored and _contains(stored[k], v) for k, v in wanted.items())
    return bool(stored == wanted)


def _uid_owner(obj: dict[str, Any]) -> list[Any]:
    return [ref.get("uid") for ref in (obj.get("metadata") or {}).get("ownerReferences") or []]


async def serve_dispatcher(
    *,
    nats_url: str,
    api: Any,
    stop: asyncio.Event,
    qps: float | None = None,
    burst: int | None = None,
    connect: Callable[[str], Awaitable[Bus]] = nats_bus.connect,
) -> None:
    """Run the dispatcher until ``stop`` is set; ``qps``/``burst`` default to the environment (limiter.py);
    ``connect``: how to get the bus."""
    bus = await connect(nats_url)
    limiter = limiter_from_env(qps=qps, burst=burst)
    dispatcher = Dispatcher(bus=bus, api=api, limiter=limiter)
    consumer = await bus.durable(name="dispatcher", subjects=(DECISION_FILTER,))
    log.info("service_started", qps=limiter.qps, burst=limiter.burst)
    try:
        await run_until_stopped(
            stop,
            dispatcher.fold_forever(),
            dispatcher.consume(consumer),
            dispatcher.watch_pods(),
            dispatcher.ungate_forever(),
        )
    finally:
        await bus.close()
        log.info(
            "service_stopped",
            applied=dispatcher.applied,
            failed=dispatcher.failed,
            object_writes=dispatcher.object_writes,
            object_failures=dispatcher.object_failures,
        )
