"""The dispatcher's warm standby (``consume_while_leading``, ``--standby-lease``) on the memory bus.

A lease stand-in whose ``active()`` the test sets: no Job write while it is shut, a lost
lease stops the writes before the next one and leaves the batch unacked (delivered again
one ack wait later), and in-progress acks keep a short ack wait from redelivering a batch
that is still being written.
"""

from __future__ import annotations

import asyncio
import functools

import pytest

from kueue_es import deciders
from kueue_es.events import codec, models, subjects, types
from kueue_es.events.bus.base import Delivery, DurableConsumer
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services.dispatcher.kube_api import WriteLimiter
from kueue_es.services.dispatcher.service import NotLeading, bind_decisions, consume_while_leading
from kueue_es.services.dispatcher.simulated import SimulatedDispatcher
from kueue_es.services.runtime import build_batch, cancel_and_wait

pytestmark = pytest.mark.timeout(20)


class Lease:
    """What consume_while_leading asks of a lease: active(), key, identity."""

    key, identity = "dispatcher.p0", "test"

    def __init__(self, active: bool) -> None:
        self.is_active = active

    def active(self) -> bool:
        return self.is_active


async def admitted(bus: MemoryBus, count: int, *, schema_version: int = types.SCHEMA_VERSION) -> None:
    """``count`` Job workloads and one committed admitter batch admitting them all (written in event schema
    ``schema_version``: since 17 one record carrying the decisions, before it one message per decision)."""
    decisions: list[types.Decision] = []
    for i in range(count):
        ref = types.WorkloadRef(namespace="ns", name=f"w{i}", uid=f"u{i}")
        wl = models.Workload(
            metadata=models.ObjectMeta(name=ref.name, namespace="ns", uid=ref.uid),
            spec=models.WorkloadSpec(queue_name="lq", pod_sets=[models.PodSet(requests={"cpu": 1000})]),
            owner=models.OwnerReference(api_version="batch/v1", kind="Job", name=ref.name, uid=f"job-{i}"),
        )
        await bus.publish(subjects.fact_message(types.WorkloadObserved(workload=wl)))
        assignment = types.PodSetAssignment(name="main", flavors={"cpu": "rf"}, resource_usage={"cpu": 1000}, count=1)
        decisions += [
            types.QuotaReserved(workload=ref, cluster_queue="cq", pod_set_assignments=[assignment], at_ms=1),
            types.WorkloadAdmitted(workload=ref, cluster_queue="cq", at_ms=1),
        ]
    head, rest = build_batch(
        deciders.ADMITTER,
        outputs=decisions,
        basis_seq=await bus.last_seq(),
        head_seq=0,
        now_ms=1,
        schema_version=schema_version,
    )
    await bus.commit_batch(head=head, expected_head_seq=0, rest=rest)


async def results(bus: MemoryBus) -> list[str]:
    """The workloads of the DispatchApplied results on the log (each entry of a DispatchBatchApplied), in order."""
    found = []
    for seq in range(1, await bus.last_seq() + 1):
        message = await bus.get(seq)
        if message.subject.startswith("kq.disp."):
            applied = types.dispatch_results(codec.decode(message.data))
            assert applied and all(isinstance(result, types.DispatchApplied) for result in applied)
            found.extend(result.workload.name for result in applied)
    return found


async def wait_for(predicate, *, timeout: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    async with asyncio.timeout(timeout):
        while not await predicate():
            await asyncio.sleep(0.01)


async def test_a_standby_writes_nothing_and_starts_at_once_when_it_takes_the_lease() -> None:
    bus = MemoryBus()
    await admitted(bus, 3)
    limiter = WriteLimiter(qps=1000, burst=10)
    dispatcher = SimulatedDispatcher(bus=bus, limiter=limiter)
    lease = Lease(active=False)
    bind = functools.partial(bind_decisions, bus)
    tasks = [
        asyncio.create_task(dispatcher.fold_forever()),
        asyncio.create_task(consume_while_leading(dispatcher, bind, lease, poll=0.01)),  # type: ignore[arg-type]
    ]
    try:
        await asyncio.sleep(0.3)
        assert dispatcher.state.last_seq == await bus.last_seq()  # the standby folds ...
        assert limiter.writes == 0 and await results(bus) == []  # ... and writes nothing
        lease.is_active = True
        await wait_for(lambda: _count(bus, 3))
        assert await results(bus) == ["w0", "w1", "w2"]
    finally:
        await cancel_and_wait(tasks)
    consumer = await bind()
    assert await consumer.fetch(batch=10, timeout=0.05) == []  # every decision acked


async def _count(bus: MemoryBus, n: int) -> bool:
    return len(await results(bus)) >= n


async def test_a_lost_lease_stops_the_writes_and_the_rest_is_delivered_again() -> None:
    bus = MemoryBus()
    await admitted(bus, 4)
    limiter = WriteLimiter(qps=10, burst=1)  # a write every 100 ms
    dispatcher = SimulatedDispatcher(bus=bus, limiter=limiter)
    bind = functools.partial(bind_decisions, bus, ack_wait=0.3)
    dispatcher.progress_every = 0.05
    lease = Lease(active=True)
    tasks = [
        asyncio.create_task(dispatcher.fold_forever()),
        asyncio.create_task(consume_while_leading(dispatcher, bind, lease, poll=0.01)),  # type: ignore[arg-type]
    ]
    try:
        await wait_for(lambda: _written(limiter, 1))  # a result comes once its batch is written: not waited for
        lease.is_active = False  # renew deadline passed: no write after this one
        await asyncio.sleep(0.5)
        written = await results(bus)
        assert 1 <= len(written) <= 2 and limiter.writes == len(written)
        await asyncio.sleep(0.3)
        assert await results(bus) == written  # still nothing while standing by
        lease.is_active = True  # back (or another replica): the unacked rest comes again
        await wait_for(lambda: _count(bus, 4))
    finally:
        await cancel_and_wait(tasks)
    # the Jobs written before the lease was lost were answered then, the rest after: each decision once
    assert sorted(await results(bus)) == ["w0", "w1", "w2", "w3"]


async def _written(limiter: WriteLimiter, n: int) -> bool:
    return limiter.writes >= n


class CountingConsumer(DurableConsumer):
    """A durable consumer that counts the deliveries it fetched again (attempt > 1)."""

    def __init__(self, inner: DurableConsumer) -> None:
        self.inner, self.again = inner, 0

    async def fetch(self, *, batch: int = 100, timeout: float = 1.0) -> list[Delivery]:
        deliveries = await self.inner.fetch(batch=batch, timeout=timeout)
        self.again += sum(d.attempt > 1 for d in deliveries)
        return deliveries

    async def ack(self, delivery: Delivery) -> None:
        await self.inner.ack(delivery)

    async def nak(self, delivery: Delivery, *, delay: float = 0.0) -> None:
        await self.inner.nak(delivery, delay=delay)

    async def in_progress(self, delivery: Delivery) -> None:
        await self.inner.in_progress(delivery)


async def test_in_progress_acks_keep_a_short_ack_wait_from_redelivering_a_batch_being_written() -> None:
    async def run(progress_every: float | None) -> tuple[int, int]:
        bus = MemoryBus()
        await admitted(bus, 5)
        limiter = WriteLimiter(qps=10, burst=1)  # the batch takes about 0.4 s, the ack wait is 0.15 s
        dispatcher = SimulatedDispatcher(bus=bus, limiter=limiter)
        dispatcher.progress_every = progress_every
        consumer = CountingConsumer(await bind_decisions(bus, ack_wait=0.15))
        tasks = [asyncio.create_task(dispatcher.fold_forever()), asyncio.create_task(dispatcher.consume(consumer))]
        try:
            await wait_for(lambda: _count(bus, 5))
            await asyncio.sleep(0.4)
        finally:
            await cancel_and_wait(tasks)
        return limiter.writes, consumer.again

    assert await run(0.04) == (5, 0)  # each decision written once, delivered once
    # without them, the batch comes again while it is written: a delivery again of a decision still settling
    # joins it, one that comes after its ack is written again (as a standby that took over would write it)
    writes, again = await run(None)
    assert again > 0 and writes >= 5


async def test_a_shut_gate_raises_before_the_job_write() -> None:
    bus = MemoryBus()
    await admitted(bus, 1)
    limiter = WriteLimiter(qps=1000, burst=10)
    dispatcher = SimulatedDispatcher(bus=bus, limiter=limiter)
    dispatcher.gate = lambda: False
    consumer = await bind_decisions(bus)
    folding = asyncio.create_task(dispatcher.fold_forever())
    try:
        with pytest.raises(NotLeading):
            await dispatcher.handle_batch(consumer, await consumer.fetch(batch=10, timeout=1.0))
    finally:
        await cancel_and_wait([folding])
    assert limiter.writes == 0 and await results(bus) == []


def test_the_cli_takes_one_lease_for_the_dispatcher(capsys: pytest.CaptureFixture[str]) -> None:
    from kueue_es.cli import main

    args = ["service", "dispatcher", "--nats", "nats://127.0.0.1:1", "--standby-lease", "--leader-elect"]
    assert main(args) == 2
    assert "--standby-lease (NATS) or --leader-elect (Kubernetes)" in capsys.readouterr().err
    args = ["service", "dispatcher", "--nats", "nats://127.0.0.1:1", "--standby-lease", "--standby-renew-deadline", "2"]
    assert main(args) == 2  # its timings are checked as the deciders' are
    assert "lease duration > renew deadline > retry period" in capsys.readouterr().err
