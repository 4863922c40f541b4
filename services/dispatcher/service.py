"""The dispatcher service: carry admission and eviction decisions out in Kubernetes.

A durable consumer (explicit ack) over the per-workload decisions delivers each
at least once, in order. For each, the pure :func:`services.dispatcher.core.plan`
says what to write (start an admitted Job, stop an evicted one); this runner
writes it with kubernetes-asyncio, records a DispatchApplied or DispatchFailed
result on the log (its Msg-Id is the decision's sequence, so a redelivery records
nothing new) and only then acks. An evicted workload whose Job is gone runs
nothing: the runner reports WorkloadStopped itself, so its quota is released
(Kueue: jobframework/reconciler.go, a missing job is not active).
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog

from events import codec, subjects, types
from events.bus import nats as nats_bus
from events.bus.base import Bus, Delivery, DurableConsumer
from projections.cluster import ClusterState
from services.dispatcher import core
from services.kube import client as kube
from services.kube import errors as kube_errors
from services.runtime import run_until_stopped, wall_clock_ms

log = structlog.get_logger(__name__)

DECISION_FILTER = "kq.dec.*.wl.>"


class Dispatcher:
    """Folds the log (to know flavors and jobs) and executes decisions from a durable consumer."""

    def __init__(self, *, bus: Bus, api: Any, cluster: str = subjects.DEFAULT_CLUSTER) -> None:
        self.bus, self.api, self.cluster = bus, api, cluster
        self.view = core.DispatchState()
        self._folded = asyncio.Condition()
        self.applied = 0
        self.failed = 0

    @property
    def state(self) -> ClusterState:
        """The cluster as folded so far."""
        return self.view.cluster

    async def fold_forever(self) -> None:
        """Keep the state folded up to the end of the log."""
        async for message in self.bus.read(subjects=(subjects.FACTS, subjects.DECISIONS), start_seq=1):
            try:
                core.fold(self.view, codec.decode(message.data), seq=message.seq)
            except codec.DecodeError as err:  # skipped, as every service skips it; its sequence still counts
                log.warning("event_undecodable", seq=message.seq, subject=message.subject, error=str(err))
                self.view.cluster.last_seq = max(self.view.cluster.last_seq, message.seq)
            async with self._folded:
                self._folded.notify_all()

    async def _wait_folded(self, seq: int) -> None:
        async with self._folded:
            await self._folded.wait_for(lambda: self.state.last_seq >= seq)

    async def consume(self, consumer: DurableConsumer) -> None:
        """Fetch, execute and ack decisions forever."""
        while True:
            for delivery in await consumer.fetch(batch=50, timeout=1.0):
                await self.handle(consumer, delivery)

    async def handle(self, consumer: DurableConsumer, delivery: Delivery) -> None:
        """Execute one delivered decision; ack when its result is on the log."""
        message = delivery.message
        try:
            event = codec.decode(message.data)
        except codec.DecodeError as err:
            log.warning("decision_undecodable", seq=message.seq, error=str(err))
            await consumer.ack(delivery)
            return
        await self._wait_folded(message.seq)
        action = core.plan(self.view, event, seq=message.seq)
        if action is None:
            await consumer.ack(delivery)
            return
        name = "StartJob" if isinstance(action, core.StartJob) else "Evict"
        try:
            if isinstance(action, core.StartJob):
                result = await self._start_job(action, seq=message.seq)
            else:
                result = await self._stop_job(action, seq=message.seq)
        except kube_errors.ApiError as err:
            if err.status >= 500 or err.status == 429:
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
        await self.bus.publish(
            subjects.message(
                result,
                subject=subjects.dispatch_subject(action.workload, self.cluster),
                msg_id=f"disp:{self.cluster}:{message.seq}",
            )
        )
        if isinstance(action, core.StopJob) and isinstance(result, types.DispatchFailed) and result.status == 404:
            await self._report_gone(action, seq=message.seq)
        if isinstance(result, types.DispatchApplied):
            self.applied += 1
        else:
            self.failed += 1
        await consumer.ack(delivery)

    async def _start_job(self, action: core.StartJob, *, seq: int) -> types.DispatchApplied:
        ref = kube.ref_for("batch/v1", "Job")
        job = await kube.get_object(self.api, ref, namespace=action.namespace, name=action.name)
        current = ((job.get("spec") or {}).get("template") or {}).get("spec", {}).get("tolerations") or []
        await kube.patch_object(
            self.api, ref, namespace=action.namespace, name=action.name, patch=action.patch(current_tolerations=current)
        )
        log.info("job_started", job=f"{action.namespace}/{action.name}", workload=action.workload.key, seq=seq)
        return types.DispatchApplied(
            workload=action.workload,
            decision_seq=seq,
            action="StartJob",
            target=f"Job {action.namespace}/{action.name}",
            node_selector=action.node_selector,
        )

    async def _stop_job(self, action: core.StopJob, *, seq: int) -> types.DispatchApplied | types.DispatchFailed:
        """Suspend the evicted workload's Job, restore its template and mark it (Kueue job_controller.go Stop).

        A Job that is gone, or a namesake with another UID, is a DispatchFailed 404.
        """
        ref = kube.ref_for("batch/v1", "Job")
        target = f"Job {action.namespace}/{action.name}"
        try:
            job = await kube.get_object(self.api, ref, namespace=action.namespace, name=action.name)
        except kube_errors.NotFoundError as err:
            return self._gone(action, seq=seq, message=str(err))
        uid = (job.get("metadata") or {}).get("uid", "")
        if action.uid and uid and uid != action.uid:
            return self._gone(action, seq=seq, message=f"{target} has UID {uid}, not {action.uid}: it was re-created")
        pod_spec = ((job.get("spec") or {}).get("template") or {}).get("spec") or {}
        await kube.patch_object(
            self.api, ref, namespace=action.namespace, name=action.name, patch=action.patch(current_pod_spec=pod_spec)
        )
        log.info("job_stopped", job=f"{action.namespace}/{action.name}", workload=action.workload.key, seq=seq)
        return types.DispatchApplied(workload=action.workload, decision_seq=seq, action="Evict", target=target)

    def _gone(self, action: core.StopJob, *, seq: int, message: str) -> types.DispatchFailed:
        log.info("evicted_job_gone", job=f"{action.namespace}/{action.name}", workload=action.workload.key, seq=seq)
        return types.DispatchFailed(
            workload=action.workload, decision_seq=seq, action="Evict", status=404, reason="NotFound", message=message
        )

    async def _report_gone(self, action: core.StopJob, *, seq: int) -> None:
        """The evicted workload's Job is gone, so nothing runs: WorkloadStopped, with the Msg-Id the
        watcher would give this eviction's stop (``convert.stop_version``), so it is reported once."""
        stopped = types.WorkloadStopped(workload=action.workload, reason=action.reason, at_ms=wall_clock_ms())
        await self.bus.publish(subjects.fact_message(stopped, version=f"evict-{seq}"))


async def serve_dispatcher(*, nats_url: str, api: Any, stop: asyncio.Event) -> None:
    """Run the dispatcher until ``stop`` is set."""
    bus = await nats_bus.connect(nats_url)
    dispatcher = Dispatcher(bus=bus, api=api)
    consumer = await bus.durable(name="dispatcher", subjects=(DECISION_FILTER,))
    log.info("service_started")
    try:
        await run_until_stopped(stop, dispatcher.fold_forever(), dispatcher.consume(consumer))
    finally:
        await bus.close()
        log.info("service_stopped", applied=dispatcher.applied, failed=dispatcher.failed)
