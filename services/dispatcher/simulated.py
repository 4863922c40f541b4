"""The dispatcher against a simulated Kubernetes API, for ``kueue-es bench --config``.

The real dispatcher (:mod:`.service`) reads a Job, patches it and records the
result. Here there is no API server (:class:`SimulatedApi` holds no objects): each
Job write (start an admitted workload, stop an evicted one, :class:`SimulatedJobWrites`)
takes a slot from the same client-go-like write limiter (class ``jobs``, which has the
whole budget here: the other classes write nothing and lend it their shares) and then
"lands" at once,
and the dispatcher records its DispatchApplied as usual, so a workload starts when
its dispatch write lands. The limiter is the only cost of the
API: ``qps`` None means no cap (the uncapped bench), ``--api-qps 50`` is Kueue's
test client (minimalkueue: QPS 50, burst 100).

What is written: one write per admission (StartJob) and one per eviction (Evict),
standing in for Kueue's admission and eviction status patches of the Workload.
Workload objects and ClusterQueue/LocalQueue status are not written
(``write_objects`` False): in Kueue's test the Workloads are the runner's, and the
queue status goes through a token bucket of its own (client-go keeps one per
resource kind), so neither takes from the Workload write budget the cap models.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NoReturn

import structlog

from kueue_es.events import subjects, types
from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus.base import Bus
from kueue_es.services import standby
from kueue_es.services.dispatcher import core
from kueue_es.services.dispatcher.job_writes import JobWrites, Result
from kueue_es.services.dispatcher.kube_api import DEFAULT_BURST, RawObject, WriteLimiter
from kueue_es.services.dispatcher.service import (
    Dispatcher,
    bind_decisions,
    consume_while_leading,
    observe,
    standby_lease,
)
from kueue_es.services.dispatcher.write_budget import WriteClass
from kueue_es.services.health import ObservedBus
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from kueue_es.services.runtime import run_until_stopped

log = structlog.get_logger(__name__)


class UnlimitedWrites(WriteLimiter):
    """A limiter that never waits (counts the writes): the uncapped bench."""

    def __init__(self, qps: float = float("inf"), burst: int = DEFAULT_BURST, **options: Any) -> None:
        super().__init__(qps=qps, burst=burst, **options)

    async def acquire(self, write_class: WriteClass = WriteClass.JOBS) -> None:
        """Count the write; no wait."""
        self.writes += 1
        self.writes_by_class[write_class] += 1


def simulated_limiter(qps: float | None, burst: int | None = None) -> WriteLimiter:
    """The write limiter of a simulated API: none for ``qps`` None or 0, else QPS/burst as client-go's.

    Raises ValueError for a negative ``qps`` or a burst under 1.
    """
    if not qps:
        return UnlimitedWrites()
    return WriteLimiter(qps=qps, burst=DEFAULT_BURST if burst is None else burst)


class SimulatedApi:
    """A :class:`~kueue_es.services.dispatcher.kube_api.KubeApi` with no objects: the simulated dispatcher's
    Job writes land in :class:`SimulatedJobWrites` and it keeps no other objects, so every call is a bug
    (only Jobs are simulated: a JobSet or Pod workload cannot run here)."""

    @staticmethod
    def _refuse(ref: resources.ResourceRef) -> NoReturn:
        raise RuntimeError(f"the simulated API holds no {ref.kind} objects: only Job writes are simulated")

    async def get_object(self, ref: resources.ResourceRef, *, namespace: str | None, name: str) -> RawObject:
        """Refused."""
        self._refuse(ref)

    async def list_objects(
        self, ref: resources.ResourceRef, *, namespace: str | None = None, label_selector: str | None = None
    ) -> tuple[list[RawObject], str]:
        """Refused."""
        self._refuse(ref)

    async def create_object(self, ref: resources.ResourceRef, *, namespace: str | None, body: RawObject) -> RawObject:
        """Refused."""
        self._refuse(ref)

    async def patch_object(
        self,
        ref: resources.ResourceRef,
        *,
        namespace: str | None,
        name: str,
        patch: RawObject,
        subresource: str | None = None,
    ) -> RawObject:
        """Refused."""
        self._refuse(ref)

    async def apply_object(
        self,
        ref: resources.ResourceRef,
        *,
        namespace: str | None,
        name: str,
        body: RawObject,
        field_manager: str,
        subresource: str | None = None,
    ) -> RawObject:
        """Refused."""
        self._refuse(ref)

    async def delete_object(
        self, ref: resources.ResourceRef, *, namespace: str | None, name: str, options: RawObject | None = None
    ) -> RawObject:
        """Refused."""
        self._refuse(ref)

    def watch_objects(
        self, ref: resources.ResourceRef, *, label_selector: str | None = None
    ) -> AsyncIterator[kube.WatchEvent | kube.Resynced]:
        """Refused."""
        self._refuse(ref)


class SimulatedJobWrites(JobWrites):
    """Job writes that land at once: a limiter slot each, never failing, nothing read first."""

    async def start_job(self, action: core.StartJob, *, seq: int) -> Result:
        """Take a write slot; the Job has started."""
        await self.limiter.acquire(WriteClass.JOBS)
        return types.DispatchApplied(
            workload=action.workload,
            decision_seq=seq,
            action="StartJob",
            target=f"Job {action.namespace}/{action.name}",
            node_selector=action.node_selector,
        )

    async def stop_never_started(self, action: core.StopJob, *, seq: int) -> tuple[Result, bool]:
        """The Job was never started (its start was skipped): it is still suspended, so no Job write
        (:meth:`JobWrites.stop_never_started`), and the dispatcher reports it stopped. It still takes a
        write slot: one simulated write stands for Kueue's write for the decision, here the eviction's
        status patch, which Kueue makes whether the job ran or not (docs/benchmarks.md, "What the
        dispatcher writes")."""
        await self.limiter.acquire(WriteClass.JOBS)
        return self.stopped(action, seq=seq), False

    async def stop_job(self, action: core.StopJob, *, seq: int) -> Result:
        """Take a write slot; the Job has stopped."""
        await self.limiter.acquire(WriteClass.JOBS)
        return self.stopped(action, seq=seq)


class SimulatedDispatcher(Dispatcher):
    """The dispatcher whose Job writes land in a simulated API: a limiter slot each, never failing."""

    def __init__(self, *, bus: Bus, limiter: WriteLimiter, cluster: str = subjects.DEFAULT_CLUSTER) -> None:
        super().__init__(bus=bus, api=SimulatedApi(), cluster=cluster, limiter=limiter, write_objects=False)
        self.jobs = SimulatedJobWrites(api=self.api, limiter=self.limiter)


async def serve_simulated_dispatcher(
    *,
    nats_url: str,
    stop: asyncio.Event,
    qps: float | None = None,
    burst: int | None = None,
    connect: Callable[[str], Awaitable[Bus]] = nats_bus.connect,
    standby_settings: standby.StandbySettings | None = None,
) -> None:
    """Run the dispatcher against a simulated API until ``stop`` is set (``qps`` None: uncapped;
    ``connect``: how to get the bus; ``standby_settings``: only while holding the dispatcher's lease,
    as :func:`~kueue_es.services.dispatcher.service.serve_dispatcher`)."""
    bus = await connect(nats_url)
    limiter = simulated_limiter(qps, burst)
    dispatcher = SimulatedDispatcher(bus=bus, limiter=limiter)
    if isinstance(bus, ObservedBus):  # the observed bus carries the Health it reports to
        observe(dispatcher, bus)
    lease = None
    if standby_settings is not None:
        lease, bind = await standby_lease(bus, dispatcher, standby_settings)
    if lease is None:
        consumer = await bind_decisions(bus, pending_outcomes=False)  # no Events to record
    log.info(
        "service_started",
        simulated_api=True,
        qps=limiter.qps,
        burst=limiter.burst,
        lease=lease.key if lease is not None else None,
        identity=lease.identity if lease is not None else None,
    )
    if lease is None:
        work = [dispatcher.consume(consumer)]
    else:
        if isinstance(bus, ObservedBus):
            standby.observe(lease, bus.health, role="dispatch")
        work = [consume_while_leading(dispatcher, bind, lease), lease.run()]
    try:
        await run_until_stopped(stop, dispatcher.fold_forever(), *work)
    finally:
        if lease is not None:
            await lease.release()
        await bus.close()
        log.info("service_stopped", applied=dispatcher.applied, failed=dispatcher.failed, writes=limiter.writes)
