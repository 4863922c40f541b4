"""The dispatcher's acks never hold a later decision (issue 15: no head-of-line blocking).

On the memory bus, observed by a :class:`Health` as ``kueue-es service`` observes it (its
durable consumer keeps trying an ack that fails transiently): acks that keep failing are
tried again beside the next decisions, whose Jobs still start; each decision's result is on
the log before its ack; /readyz is false and says how many acks are outstanding and retried;
an ack that fails past the bound is given up, the dispatcher stays not ready until an ack goes
through, and the redelivered decision is acked without being executed again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from kueue_es import deciders
from kueue_es.events import codec, models, subjects, types
from kueue_es.events.bus.base import Delivery, DurableConsumer, TransientBusError
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services.dispatcher.kube_api import WriteLimiter
from kueue_es.services.dispatcher.service import bind_decisions, observe
from kueue_es.services.dispatcher.settling import Settling
from kueue_es.services.dispatcher.simulated import SimulatedDispatcher
from kueue_es.services.health import Health, ObservedDurable
from kueue_es.services.runtime import build_batch, cancel_and_wait

pytestmark = pytest.mark.timeout(30)


class FlakyAcks(DurableConsumer):
    """A durable consumer whose acks fail (TransientBusError, as an ack finding the outgoing buffer full)
    while ``failing``; each ack that goes through checks that its decision's result is on the log (since
    event schema 17 the acks are the records', under :class:`CarriedDecisions` as the server's are)."""

    def __init__(self, inner: DurableConsumer, bus: MemoryBus) -> None:
        self.inner, self.bus = inner, bus
        self.failing = False
        self.failures = 0
        self.acked: list[int] = []
        self.acked_before_result: list[int] = []

    async def fetch(self, *, batch: int = 100, timeout: float = 1.0) -> list[Delivery]:
        return await self.inner.fetch(batch=batch, timeout=timeout)

    async def ack(self, delivery: Delivery) -> None:
        if self.failing:
            self.failures += 1
            raise TransientBusError(f"Acking {delivery.message.seq} failed: OutboundBufferLimitError")
        event = codec.decode(delivery.message.data)
        decisions = event.all_decisions() if isinstance(event, types.DecisionRecord) else (event,)
        admits = any(isinstance(decision, types.WorkloadAdmitted) for decision in decisions)
        if admits and delivery.message.seq not in await result_seqs(self.bus):
            self.acked_before_result.append(delivery.message.seq)
        self.acked.append(delivery.message.seq)
        await self.inner.ack(delivery)

    async def nak(self, delivery: Delivery, *, delay: float = 0.0) -> None:
        await self.inner.nak(delivery, delay=delay)


async def admit(bus: MemoryBus, name: str, *, schema_version: int = types.SCHEMA_VERSION) -> int:
    """A Job workload ``name`` and one committed admitter batch admitting it (in event schema ``schema_version``);
    the WorkloadAdmitted's sequence (since schema 17 its record's, which carries it)."""
    ref = types.WorkloadRef(namespace="ns", name=name, uid=f"u-{name}")
    wl = models.Workload(
        metadata=models.ObjectMeta(name=name, namespace="ns", uid=ref.uid),
        spec=models.WorkloadSpec(queue_name="lq", pod_sets=[models.PodSet(requests={"cpu": 1000})]),
        owner=models.OwnerReference(api_version="batch/v1", kind="Job", name=name, uid=f"job-{name}"),
    )
    await bus.publish(subjects.fact_message(types.WorkloadObserved(workload=wl)))
    assignment = types.PodSetAssignment(name="main", flavors={"cpu": "rf"}, resource_usage={"cpu": 1000}, count=1)
    decisions: list[types.Decision] = [
        types.QuotaReserved(workload=ref, cluster_queue="cq", pod_set_assignments=[assignment], at_ms=1),
        types.WorkloadAdmitted(workload=ref, cluster_queue="cq", at_ms=1),
    ]
    head_seq = await bus.last_subject_seq(subjects.head_subject(deciders.ADMITTER.role))
    head, rest = build_batch(
        deciders.ADMITTER,
        outputs=decisions,
        basis_seq=await bus.last_seq(),
        head_seq=head_seq,
        now_ms=1,
        schema_version=schema_version,
    )
    return await bus.commit_batch(head=head, expected_head_seq=head_seq, rest=rest)


async def result_seqs(bus: MemoryBus) -> list[int]:
    """The decision sequences of the dispatch results on the log, in log order."""
    found = []
    for seq in range(1, await bus.last_seq() + 1):
        message = await bus.get(seq)
        if message.subject.startswith("kq.disp."):
            results = types.dispatch_results(codec.decode(message.data))
            assert results, message.subject
            found.extend(result.decision_seq for result in results)
    return found


async def until(predicate: Callable[[], Awaitable[bool]], *, what: str, timeout: float = 10.0) -> None:
    try:
        async with asyncio.timeout(timeout):
            while not await predicate():
                await asyncio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"not within {timeout} s: {what}") from None


async def started(bus: MemoryBus, seq: int) -> bool:
    return seq in await result_seqs(bus)


class Running:
    """A simulated dispatcher on an observed memory bus consuming through FlakyAcks."""

    def __init__(self, *, ack_wait: float = 30.0, ack_retry_seconds: float | None = None) -> None:
        self.memory = MemoryBus()
        self.health = Health(service="dispatcher")
        self.ack_wait, self.ack_retry_seconds = ack_wait, ack_retry_seconds
        self.tasks: list[asyncio.Task[Any]] = []

    async def __aenter__(self) -> Running:
        self.bus = await self.health.observe(self.memory)
        self.limiter = WriteLimiter(qps=1000, burst=100)
        self.dispatcher = SimulatedDispatcher(bus=self.bus, limiter=self.limiter)
        if self.ack_retry_seconds is not None:
            self.dispatcher.settling.retry_seconds = self.ack_retry_seconds
        observe(self.dispatcher, self.bus)
        # as in a service: the server's consumer keeps trying what fails (ObservedBus.durable), and the
        # dispatcher's wrap hands over the decisions the records carry (bind_decisions)
        carried = await bind_decisions(self.memory, ack_wait=self.ack_wait)
        self.flaky = FlakyAcks(carried.inner, self.memory)
        carried.inner = ObservedDurable(self.flaky, health=self.health)
        if self.ack_retry_seconds is not None:
            carried.record_ack_seconds = self.ack_retry_seconds
        consumer = carried
        self.tasks = [
            asyncio.create_task(self.dispatcher.fold_forever()),
            asyncio.create_task(self.dispatcher.consume(consumer)),
        ]
        return self

    async def __aexit__(self, *exc: object) -> None:
        await cancel_and_wait(self.tasks)
        await self.memory.close()

    def facts(self) -> dict[str, Any]:
        return self.health.readiness()[1]

    def ready(self) -> bool:
        return self.health.readiness()[0]

    def alive(self) -> None:
        assert not any(task.done() for task in self.tasks), [t.exception() for t in self.tasks if t.done()]


async def test_the_job_of_a_later_decision_starts_while_an_earlier_decisions_ack_is_failing() -> None:
    async with Running() as run:
        first = await admit(run.memory, "w0")  # one record carrying w0's QuotaReserved and WorkloadAdmitted
        await until(lambda: started(run.memory, first), what="w0 started")
        # its result stored does not mean its ack went out (a turn or two later): wait for it
        await until(lambda: _true(first in run.flaky.acked), what="w0 acked")
        await until(lambda: _true(run.ready()), what="ready")
        run.flaky.failing = True
        second = await admit(run.memory, "w1")
        await until(lambda: _true(run.flaky.failures >= 2), what="w1's record's ack failing")
        # the ack of w1's record keeps failing: w2's Job starts all the same
        third = await admit(run.memory, "w2")
        await until(lambda: started(run.memory, third), what="w2 started while w1's ack fails")
        facts = run.facts()
        assert run.flaky.failing and max(run.flaky.acked) == first  # nothing of w1 or w2 acked yet
        assert not run.ready() and "ack" in facts["retrying"]
        # a record is acked with the last of its decisions: w1's and w2's WorkloadAdmitted settle, the
        # QuotaReserved before each is acked (nothing for the server yet)
        assert facts["acks_outstanding"] == 2 and facts["acks_retrying"] >= 1
        assert b"kueue_es_dispatch_acks_outstanding" in run.health.metrics()
        run.alive()

        run.flaky.failing = False
        await until(lambda: _true(run.facts()["acks_outstanding"] == 0), what="every decision acked")
        await until(lambda: _true(run.ready()), what="ready again")
        assert sorted(run.flaky.acked) == [first, second, third]  # each record once
        assert await result_seqs(run.memory) == [first, second, third]  # in decision order, each once
        assert run.limiter.writes == 3 and run.flaky.acked_before_result == []
        assert run.facts()["acks_abandoned"] == 0


async def test_the_job_of_a_later_decision_of_its_own_starts_while_an_earlier_decisions_ack_is_failing() -> None:
    """The same on a log of event schema 16: each decision a message of its own, acked on its own."""
    async with Running() as run:
        first = await admit(run.memory, "w0", schema_version=16)
        await until(lambda: started(run.memory, first), what="w0 started")
        await until(lambda: _true(first in run.flaky.acked), what="w0 acked")
        await until(lambda: _true(run.ready()), what="ready")
        run.flaky.failing = True
        second = await admit(run.memory, "w1", schema_version=16)
        await until(lambda: _true(run.flaky.failures >= 2), what="w1's acks failing")
        third = await admit(run.memory, "w2", schema_version=16)
        await until(lambda: started(run.memory, third), what="w2 started while w1's acks fail")
        facts = run.facts()
        assert run.flaky.failing and max(run.flaky.acked) == first  # nothing of w1 or w2 acked yet
        assert not run.ready() and "ack" in facts["retrying"]
        assert facts["acks_outstanding"] == 4 and facts["acks_retrying"] >= 1  # w1's two decisions, w2's two
        run.alive()

        run.flaky.failing = False
        await until(lambda: _true(run.facts()["acks_outstanding"] == 0), what="every decision acked")
        await until(lambda: _true(run.ready()), what="ready again")
        decisions = [first - 1, first, second - 1, second, third - 1, third]
        assert sorted(seq for seq in run.flaky.acked if seq in decisions) == decisions  # each once
        assert await result_seqs(run.memory) == [first, second, third]  # in decision order, each once
        assert run.limiter.writes == 3 and run.flaky.acked_before_result == []
        assert run.facts()["acks_abandoned"] == 0


async def test_an_ack_failing_past_the_bound_is_given_up_and_its_redelivery_acked_without_a_second_write() -> None:
    async with Running(ack_wait=2.0, ack_retry_seconds=0.3) as run:
        await until(lambda: _true(run.ready()), what="ready")
        run.flaky.failing = True
        admitted = await admit(run.memory, "w0")  # one record carrying w0's QuotaReserved and WorkloadAdmitted
        # the record is acked with its last decision: that ack is the one given up
        await until(lambda: _true(run.facts()["acks_abandoned"] == 1), what="w0's record's ack given up")
        # no longer retried, nothing outstanding: still not ready, the acks keep failing
        facts = run.facts()
        assert facts["acks_outstanding"] == 0 and facts["acks_failing"] and facts["retrying"] == []
        assert not run.ready()
        assert b'kueue_es_dispatch_acks_abandoned_total{service="dispatcher"} 1.0' in run.health.metrics()
        run.alive()

        # the server delivers the record again after the ack wait: the decision whose ack was given up comes
        # again, is acked (the record with it), not executed
        run.flaky.failing = False
        await until(lambda: _true(admitted in run.flaky.acked), what="the admission acked after its redelivery")
        await until(lambda: _true(run.ready()), what="ready again")
        assert await result_seqs(run.memory) == [admitted]
        assert run.limiter.writes == 1 and run.flaky.acked_before_result == []
        consumer = await bind_decisions(run.memory)
        assert await consumer.fetch(batch=10, timeout=2.5) == []  # every decision acked (none comes again)


async def test_an_ack_of_a_decision_of_its_own_failing_past_the_bound_is_given_up_and_its_redelivery_acked() -> None:
    """The same on a log of event schema 16: each decision a message of its own, each ack given up."""
    async with Running(ack_wait=2.0, ack_retry_seconds=0.3) as run:
        await until(lambda: _true(run.ready()), what="ready")
        run.flaky.failing = True
        admitted = await admit(run.memory, "w0", schema_version=16)
        await until(lambda: _true(run.facts()["acks_abandoned"] == 2), what="w0's acks given up")
        facts = run.facts()
        assert facts["acks_outstanding"] == 0 and facts["acks_failing"] and facts["retrying"] == []
        assert not run.ready()
        assert b'kueue_es_dispatch_acks_abandoned_total{service="dispatcher"} 2.0' in run.health.metrics()
        run.alive()

        run.flaky.failing = False  # the server delivers both again after the ack wait: acked, not executed
        await until(lambda: _true(admitted in run.flaky.acked), what="the admission acked after its redelivery")
        await until(lambda: _true(run.ready()), what="ready again")
        assert await result_seqs(run.memory) == [admitted]
        assert run.limiter.writes == 1 and run.flaky.acked_before_result == []
        consumer = await bind_decisions(run.memory)
        assert await consumer.fetch(batch=10, timeout=2.5) == []  # every decision acked (none comes again)


async def _true(value: bool) -> bool:
    return value


async def test_results_keep_the_one_at_a_time_order_around_a_result_followed_by_facts() -> None:
    """A result followed by facts (a gone Job) waits for every earlier result, and later results wait for
    its facts, however long an earlier result takes to be stored."""
    settling = Settling()
    log: list[str] = []
    slow = asyncio.Event()

    async def publish(name: str, *, wait: asyncio.Event | None = None) -> None:
        if wait is not None:
            await wait.wait()
        log.append(name)

    async def facts() -> None:
        log.append("gone facts")

    first = settling.result(publish("first", wait=slow))
    gone = settling.result_then(publish("gone"), facts)
    after = settling.result(publish("after"))
    await asyncio.sleep(0.05)
    assert log == [] and not gone.done() and not after.done()  # all behind the first
    slow.set()
    await asyncio.gather(first, gone, after)
    assert log == ["first", "gone", "gone facts", "after"]
    await settling.close()
