"""The dispatcher's results per DecisionRecord (issue 18, services/dispatcher/record_results.py).

On the memory bus: a record's subject is published to expecting its last sequence; a refused
publish (another holder answered part of the record) reads the subject and answers only the
rest; a dispatcher restarted on the same log answers no decision twice and acks them all.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kueue_es.events import codec, subjects, types
from kueue_es.events.bus.base import Delivery, DurableConsumer, LogMessage
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services.dispatcher.kube_api import WriteLimiter
from kueue_es.services.dispatcher.record_results import RecordResults, record_of
from kueue_es.services.dispatcher.service import bind_decisions
from kueue_es.services.dispatcher.simulated import SimulatedDispatcher
from kueue_es.services.runtime import cancel_and_wait
from tests.unit.test_dispatcher_standby import admitted

pytestmark = pytest.mark.timeout(20)

SUBJECT = subjects.record_dispatch_subject("p0", 10)


def entry(seq: int, *, index: int = 0) -> types.DispatchEntry:
    return types.DispatchEntry(
        decision_seq=seq,
        workload=types.WorkloadRef(namespace="ns", name=f"w{seq}"),
        action="StartJob",
        decision_index=index,
    )


async def with_record(bus: MemoryBus) -> None:
    """Ten messages before the record's results, as the record and its outputs are (record 10)."""
    for i in range(10):
        await bus.publish(subjects.fact_message(types.ObjectDeleted(kind="Workload", namespace="ns", name=f"x{i}")))


async def answers(bus: MemoryBus, prefix: str = "kq.disp.") -> list[int]:
    """The decision seqs every dispatch result on the log answers, in log order (repeats kept)."""
    found: list[int] = []
    for seq in range(1, await bus.last_seq() + 1):
        message = await bus.get(seq)
        if message.subject.startswith(prefix):
            found += [result.decision_seq for result in types.dispatch_results(codec.decode(message.data))]
    return found


def test_a_decision_names_its_record_by_its_msg_id() -> None:
    def at(seq: int, msg_id: str) -> LogMessage:
        return LogMessage(seq=seq, subject="kq.dec.p0.wl.ns.w", data=b"{}", headers={"Nats-Msg-Id": msg_id})

    assert record_of(at(10, "admit:p0:5:3")) == ("p0", 7)
    assert record_of(at(10, "preempt:p-1:9:1")) == ("p-1", 9)
    assert record_of(at(10, "admit:p0:5:0")) is None  # the record itself
    assert record_of(at(10, "disp:local:4")) is None
    assert record_of(at(3, "admit:p0:1:3")) is None  # no record before it
    assert record_of(LogMessage(seq=4, subject="kq.dec.p0.wl.ns.w", data=b"{}")) is None


async def test_the_first_result_of_a_record_expects_it_empty_and_the_next_its_last() -> None:
    bus = MemoryBus()
    await with_record(bus)
    results = RecordResults(bus=bus, cluster="local")
    # two results of one record handed over before either is stored: the second waits for the first
    first = asyncio.ensure_future(results.publish("p0", 10, [entry(11), entry(12)]))
    second = asyncio.ensure_future(results.publish("p0", 10, [entry(13)]))
    await asyncio.gather(first, second)
    assert await answers(bus) == [11, 12, 13]
    assert (results.published, results.refused) == (2, 0)
    stored = await bus.get(11)
    assert stored.subject == SUBJECT and stored.headers["Kq-Type"] == "DispatchBatchApplied"
    batch = codec.decode(stored.data)
    assert isinstance(batch, types.DispatchBatchApplied) and (batch.partition, batch.record_seq) == ("p0", 10)


async def test_a_refused_result_answers_only_the_decisions_not_answered_already() -> None:
    bus = MemoryBus()
    await with_record(bus)
    before = RecordResults(bus=bus, cluster="local")  # the holder before a restart or a takeover
    await before.publish("p0", 10, [entry(11), entry(12)])
    after = RecordResults(bus=bus, cluster="local")  # knows nothing of it: expects the subject empty
    await after.publish("p0", 10, [entry(11), entry(12), entry(13)])
    assert await answers(bus) == [11, 12, 13]  # each decision once
    assert (after.refused, after.answered_before, after.published) == (1, 2, 1)
    # everything answered already: nothing published, no error (the decisions are acked)
    again = RecordResults(bus=bus, cluster="local")
    await again.publish("p0", 10, [entry(12), entry(13)])
    assert await answers(bus) == [11, 12, 13]
    assert (again.refused, again.answered_before, again.published) == (1, 2, 0)
    # and a later decision of the record then expects the last result read
    await again.publish("p0", 10, [entry(14)])
    assert await answers(bus) == [11, 12, 13, 14] and again.refused == 1


async def test_a_dispatcher_knows_what_it_answered_on_a_record() -> None:
    """A decision delivered again to the dispatcher that answered it (its ack lost) is not answered
    again, though its subject does not refuse the publish (it expects what it stored itself)."""
    bus = MemoryBus()
    await with_record(bus)
    results = RecordResults(bus=bus, cluster="local")
    await results.publish("p0", 10, [entry(11)])
    await results.publish("p0", 10, [entry(11), entry(12)])
    assert await answers(bus) == [11, 12]
    assert (results.refused, results.answered_before) == (0, 1)


class AcksLost(DurableConsumer):
    """A durable consumer whose acks never reach the server (a dispatcher killed before its acks)."""

    def __init__(self, inner: DurableConsumer) -> None:
        self.inner = inner

    async def fetch(self, *, batch: int = 100, timeout: float = 1.0) -> list[Delivery]:
        return await self.inner.fetch(batch=batch, timeout=timeout)

    async def ack(self, delivery: Delivery) -> None:
        return None

    async def nak(self, delivery: Delivery, *, delay: float = 0.0) -> None:
        await self.inner.nak(delivery, delay=delay)


async def _dispatch_once(
    bus: MemoryBus, consumer: Any, *, batch: int, delivered: int | None = None, handled: int | None = None
) -> SimulatedDispatcher:
    """A fresh dispatcher (a restarted process) folds the log and handles what the consumer delivers: a fetch of
    ``batch`` decisions that hands over ``delivered`` (``batch`` unless given: a record comes with all the
    decisions it carries), of which it handles the first ``handled`` (all unless given: killed after those)."""
    dispatcher = SimulatedDispatcher(bus=bus, limiter=WriteLimiter(qps=1000, burst=100))
    fold = asyncio.create_task(dispatcher.fold_forever())
    try:
        deliveries = await consumer.fetch(batch=batch, timeout=2.0)
        assert len(deliveries) == (batch if delivered is None else delivered)
        await dispatcher.handle_batch(consumer, deliveries[:handled])
    finally:
        await cancel_and_wait([fold])
    return dispatcher


async def answered_decisions(bus: MemoryBus) -> list[tuple[int, int]]:
    """The decisions (``(decision_seq, decision_index)``) the batch results on the log answer, in log order."""
    found: list[tuple[int, int]] = []
    for seq in range(1, await bus.last_seq() + 1):
        message = await bus.get(seq)
        event = codec.decode(message.data) if message.subject.startswith("kq.disp.") else None
        if isinstance(event, types.DispatchBatchApplied):
            found += [(e.decision_seq, e.decision_index) for e in event.entries]
    return found


async def test_a_restarted_dispatcher_answers_each_decision_once_and_acks_it() -> None:
    bus = MemoryBus()
    await admitted(bus, 3)  # one record carrying 3 QuotaReserved and 3 WorkloadAdmitted (schema 17)
    durable = await bind_decisions(bus, ack_wait=0.2)
    # the first process is handed the record's six decisions, executes w0's two (starts its Job, stores the
    # result) and is killed before its acks
    first = await _dispatch_once(bus, AcksLost(durable), batch=2, delivered=6, handled=2)
    assert first.applied == 1 and len(await answered_decisions(bus)) == 1
    await asyncio.sleep(0.3)  # the ack wait passes: the record comes again, all six decisions, to a new process
    second = await _dispatch_once(bus, durable, batch=6)
    answered = await answered_decisions(bus)
    record_seq = await bus.last_subject_seq(subjects.heads_of())
    # each admission once, at the record's sequence, by its place among the record's decisions
    assert sorted(answered) == [(record_seq, 2), (record_seq, 4), (record_seq, 6)]
    results = second.record_results
    assert (results.refused, results.answered_before, results.published) == (1, 1, 1)
    assert await durable.fetch(batch=10, timeout=0.4) == []  # the record acked
    # the same batch again (a restart that fetched the same decisions): the duplicate, nothing new
    third = RecordResults(bus=bus, cluster="local")
    last = await bus.last_seq()
    seq, index = answered[0]
    await third.publish("p0", record_seq, [entry(seq, index=index)])
    assert await bus.last_seq() == last and (third.duplicates, third.refused, third.published) == (1, 0, 0)


async def test_a_restarted_dispatcher_answers_each_decision_of_its_own_message_once_and_acks_it() -> None:
    """The same on a log of event schema 16 (each decision a message of its own after its record)."""
    bus = MemoryBus()
    await admitted(bus, 3, schema_version=16)  # one record: 3 QuotaReserved and 3 WorkloadAdmitted after it
    durable = await bind_decisions(bus, ack_wait=0.2)
    # the first process takes the record (nothing to execute: acked) and w0's two decisions, starts its Job,
    # stores the result, is killed before its acks
    first = await _dispatch_once(bus, AcksLost(durable), batch=3, delivered=2)
    assert first.applied == 1 and len(await answers(bus)) == 1
    await asyncio.sleep(0.3)  # the ack wait passes: w0's decisions come again, with the rest, to a new process
    second = await _dispatch_once(bus, durable, batch=6)
    answered = await answers(bus)
    assert len(answered) == 3 and len(set(answered)) == 3  # each admission once
    results = second.record_results
    assert (results.refused, results.answered_before, results.published) == (1, 1, 1)
    assert await durable.fetch(batch=10, timeout=0.4) == []  # all acked
    # the same batch again (a restart that fetched the same decisions): the duplicate, nothing new
    third = RecordResults(bus=bus, cluster="local")
    record_seq = await bus.last_subject_seq(subjects.heads_of())
    last = await bus.last_seq()
    await third.publish("p0", record_seq, [entry(seq) for seq in answered[:1]])
    assert await bus.last_seq() == last and (third.duplicates, third.refused, third.published) == (1, 0, 0)


async def test_a_decision_applied_before_a_restart_is_not_answered_again_when_its_job_is_gone() -> None:
    """Its batch result was stored, its ack lost; delivered again to a new process, its Job is gone
    by then (a 404): the DispatchFailed is not published, the decision is acked (answered once)."""
    bus = MemoryBus()
    await admitted(bus, 1)
    durable = await bind_decisions(bus, ack_wait=0.2)
    first = await _dispatch_once(bus, AcksLost(durable), batch=2)
    assert first.applied == 1
    await asyncio.sleep(0.3)
    second = SimulatedDispatcher(bus=bus, limiter=WriteLimiter(qps=1000, burst=100))

    async def gone(action: Any, *, seq: int) -> types.DispatchFailed:
        return second.jobs.gone(action, seq=seq, message="Job ns/w0 is gone")

    second.jobs.carry_out = gone  # type: ignore[method-assign]
    fold = asyncio.create_task(second.fold_forever())
    try:
        deliveries = await durable.fetch(batch=2, timeout=2.0)
        assert [d.attempt for d in deliveries] == [2, 2]
        await second.handle_batch(durable, deliveries)
    finally:
        await cancel_and_wait([fold])
    assert len(await answers(bus)) == 1  # the first process's entry only: no DispatchFailed
    kinds = [(await bus.get(s)).headers.get("Kq-Type") for s in range(1, await bus.last_seq() + 1)]
    assert "DispatchFailed" not in kinds and "ObjectDeleted" not in kinds
    assert await durable.fetch(batch=10, timeout=0.4) == []  # acked
