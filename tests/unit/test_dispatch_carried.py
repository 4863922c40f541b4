"""The decisions a DecisionRecord carries (event schema 17) reach the dispatcher one by one.

``services/dispatcher/carried.py``: the durable consumer reads the records' heads too; each record is
handed over as one delivery per carried decision, keyed by (record sequence, index); the record is acked
once every decision of it is, a nak of one naks the record, and its next delivery brings only the rest.
"""

from __future__ import annotations

import asyncio

import pytest

from kueue_es import deciders
from kueue_es.events import codec, subjects, types
from kueue_es.events.bus.base import Delivery, DurableConsumer, LogMessage, TransientBusError
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services.dispatcher import carried
from kueue_es.services.dispatcher.record_results import record_of
from kueue_es.services.dispatcher.service import bind_decisions
from kueue_es.services.runtime import build_batch


def ref(name: str) -> types.WorkloadRef:
    return types.WorkloadRef(namespace="default", name=name, uid=f"uid-{name}")


DECISIONS = [types.WorkloadAdmitted(workload=ref(name), cluster_queue="cq", at_ms=5) for name in ("a", "b", "c")]


async def a_log(bus: MemoryBus, *, pending_only: bool = False) -> int:
    """A fact, then a schema-17 record carrying :data:`DECISIONS` (or only a pending outcome); its sequence."""
    fact = types.ObjectDeleted(kind="Workload", namespace="default", name="gone", uid="u")
    await bus.publish(subjects.fact_message(fact))
    outputs: list[types.Output] = (
        [types.PendingOutcome(workload=ref("a"), reason="Pending", message="waits")] if pending_only else DECISIONS
    )
    head, rest = build_batch(deciders.ADMITTER, outputs=outputs, basis_seq=1, head_seq=0, now_ms=5)
    assert rest == []
    return await bus.commit_batch(head=head, expected_head_seq=0, rest=rest)


async def test_a_record_is_delivered_as_its_decisions_each_keyed_by_its_place() -> None:
    bus = MemoryBus()
    seq = await a_log(bus)
    consumer = await bind_decisions(bus)
    deliveries = await consumer.fetch(batch=10, timeout=0.5)
    assert [carried.decision_key(d) for d in deliveries] == [(seq, 1), (seq, 2), (seq, 3)]
    assert [carried.carried_decision(d) for d in deliveries] == DECISIONS
    assert [d.message.subject for d in deliveries] == [
        subjects.workload_decision_subject(decision.workload) for decision in DECISIONS
    ]
    # the Msg-Id its output message had: the record names it, as record_results reads it
    assert [d.message.headers["Nats-Msg-Id"] for d in deliveries] == [f"admit:p0:1:{i}" for i in (1, 2, 3)]
    assert [record_of(d.message, carried.decision_index(d)) for d in deliveries] == [("p0", seq)] * 3


async def test_the_record_is_acked_once_all_its_decisions_are() -> None:
    bus = MemoryBus()
    await a_log(bus)
    consumer = await bind_decisions(bus, ack_wait=0.2)
    first = await consumer.fetch(batch=10, timeout=0.5)
    for delivery in first[:2]:
        await consumer.ack(delivery)
    await asyncio.sleep(0.3)  # the record's ack wait passes: it comes again, with only the decision not acked
    again = await consumer.fetch(batch=10, timeout=0.5)
    assert [carried.decision_key(d)[1] for d in again] == [3] and again[0].attempt == 2
    await consumer.ack(again[0])
    assert consumer.acked_records == 1
    await asyncio.sleep(0.3)
    assert await consumer.fetch(batch=10, timeout=0.3) == []


async def test_a_nak_of_one_decision_brings_back_only_those_not_acked() -> None:
    bus = MemoryBus()
    await a_log(bus)
    consumer = await bind_decisions(bus)
    first = await consumer.fetch(batch=10, timeout=0.5)
    await consumer.ack(first[0])
    await consumer.nak(first[1], delay=0.0)
    await consumer.nak(first[2], delay=0.0)  # the record was nak'ed once already: nothing more is asked
    await consumer.ack(first[2])
    again = await consumer.fetch(batch=10, timeout=0.5)
    assert [carried.decision_key(d)[1] for d in again] == [2]
    await consumer.ack(again[0])
    assert consumer.acked_records == 1


async def test_a_record_carrying_no_decision_is_acked_at_once() -> None:
    """A record of pending outcomes only is acked beside the fetch; its outcomes are handed over for their Events
    and status (Kueue's scheduler records a Pending Event on each workload it puts back in line), asking for no
    ack; a dispatcher that writes no objects is handed none."""
    bus = MemoryBus()
    seq = await a_log(bus, pending_only=True)
    consumer = await bind_decisions(bus, ack_wait=0.2)
    [outcome] = await consumer.fetch(batch=10, timeout=0.3)
    assert carried.is_pending(outcome) and carried.decision_key(outcome) == (seq, 1)
    assert carried.carried_decision(outcome) == types.WorkloadInadmissible(
        workload=ref("a"), reason="Pending", message="waits", at_ms=5
    )
    await consumer.ack(outcome)  # nothing: the record was acked at once
    await consumer.nak(outcome)
    await asyncio.sleep(0.01)  # its ack goes out beside the fetch
    assert consumer.acked_records == 1
    await asyncio.sleep(0.3)
    assert await consumer.fetch(batch=10, timeout=0.3) == []  # acked: never delivered again
    lean = await bind_decisions(MemoryBus(), pending_outcomes=False)
    assert lean.pending_outcomes is False


async def test_a_records_pending_outcomes_follow_its_decisions_and_ask_no_ack() -> None:
    bus = MemoryBus()
    outcome = types.PendingOutcome(workload=ref("d"), reason="Pending", message="waits")
    head, rest = build_batch(deciders.ADMITTER, outputs=[*DECISIONS, outcome], basis_seq=0, head_seq=0, now_ms=5)
    seq = await bus.commit_batch(head=head, expected_head_seq=0, rest=rest)
    consumer = await bind_decisions(bus, ack_wait=0.2)
    deliveries = await consumer.fetch(batch=10, timeout=0.5)
    assert [(carried.decision_key(d), carried.is_pending(d)) for d in deliveries] == [
        ((seq, 1), False),
        ((seq, 2), False),
        ((seq, 3), False),
        ((seq, 4), True),
    ]
    for delivery in deliveries[:3]:
        await consumer.ack(delivery)
    assert consumer.acked_records == 1  # its decisions acked: the pending outcome is not waited for


class FailingAcks(DurableConsumer):
    """The server's consumer, its acks failing (TransientBusError) while ``failing``; ``hang``: an ack waits for
    ever instead (a consumer that keeps trying it, as ObservedDurable)."""

    def __init__(self, inner: DurableConsumer) -> None:
        self.inner, self.failing, self.hang, self.acked = inner, True, False, 0

    async def fetch(self, *, batch: int = 100, timeout: float = 1.0) -> list[Delivery]:
        return await self.inner.fetch(batch=batch, timeout=timeout)

    async def ack(self, delivery: Delivery) -> None:
        if self.hang:
            await asyncio.Event().wait()
        if self.failing:
            raise TransientBusError(f"Acking {delivery.message.seq} failed")
        self.acked += 1
        await self.inner.ack(delivery)

    async def nak(self, delivery: Delivery, *, delay: float = 0.0) -> None:
        await self.inner.nak(delivery, delay=delay)


async def test_a_record_whose_ack_failed_brings_its_last_decision_again() -> None:
    """The ack of the last decision is the record's: when it fails (given up by the dispatcher), that
    decision counts as not acked, and the record's next delivery brings it again (its result stored, the
    dispatcher acks it); else the record would bring nothing, and never be acked."""
    bus = MemoryBus()
    seq = await a_log(bus)
    consumer = await bind_decisions(bus, ack_wait=0.2)
    failing = FailingAcks(consumer.inner)
    consumer.inner = failing
    first = await consumer.fetch(batch=10, timeout=0.5)
    for delivery in first[:2]:
        await consumer.ack(delivery)
    with pytest.raises(TransientBusError):
        await consumer.ack(first[2])
    await asyncio.sleep(0.3)  # given up: the server delivers the record again after its ack wait
    again = await consumer.fetch(batch=10, timeout=0.5)
    assert [carried.decision_key(d) for d in again] == [(seq, 3)] and again[0].attempt == 2
    failing.failing = False
    await consumer.ack(again[0])
    assert consumer.acked_records == 1 and failing.acked == 1
    await asyncio.sleep(0.3)
    assert await consumer.fetch(batch=10, timeout=0.3) == []


async def test_the_ack_of_a_record_carrying_no_decision_holds_no_fetch() -> None:
    """A record with nothing to execute (here one of schema 16, its decision a message of its own after it)
    is acked beside the fetch: an ack that keeps being tried holds none of the decisions after it."""
    bus = MemoryBus()
    head, rest = build_batch(
        deciders.ADMITTER, outputs=DECISIONS[:1], basis_seq=0, head_seq=0, now_ms=5, schema_version=16
    )
    last = await bus.commit_batch(head=head, expected_head_seq=0, rest=rest)
    consumer = await bind_decisions(bus)
    failing = FailingAcks(consumer.inner)
    failing.hang = True
    consumer.inner = failing
    async with asyncio.timeout(2.0):
        deliveries = await consumer.fetch(batch=10, timeout=0.5)
    assert [carried.decision_key(d) for d in deliveries] == [(last, 0)]
    assert consumer.acked_records == 0
    await consumer.close()  # the record's ack under way is cancelled: the server delivers it again


async def test_an_old_consumer_over_the_decision_subjects_alone_is_given_the_heads_too() -> None:
    """A dispatcher of before schema 17 made its durable over ``kq.dec.*.wl.>`` only; binding it again brings
    its filter to :data:`carried.FILTERS`, or the records' decisions would never reach it."""
    bus = MemoryBus()
    await bus.durable(name="dispatcher", subjects=(carried.DECISION_FILTER,))
    seq = await a_log(bus)
    consumer = await bind_decisions(bus)
    deliveries = await consumer.fetch(batch=10, timeout=0.5)
    assert [carried.decision_key(d) for d in deliveries] == [(seq, 1), (seq, 2), (seq, 3)]


def test_a_message_of_its_own_keeps_its_sequence_as_its_key() -> None:
    head, rest = build_batch(
        deciders.ADMITTER, outputs=DECISIONS[:1], basis_seq=1, head_seq=0, now_ms=5, schema_version=16
    )
    assert len(rest) == 1 and codec.decode(rest[0].data) == DECISIONS[0]
    delivery = Delivery(message=LogMessage(seq=9, subject=rest[0].subject, data=rest[0].data))
    assert carried.decision_key(delivery) == (9, 0) and carried.carried_decision(delivery) is None


async def test_a_fetch_asks_for_about_a_batch_of_decisions_not_of_records() -> None:
    """Records of many decisions each: a fetch of ``batch`` records would hand the dispatcher ``batch`` times a
    record's decisions at once; it asks for as many records as carry about ``batch`` decisions."""
    bus = MemoryBus()
    await a_log(bus)
    for basis in range(2, 7):  # five more records of three decisions, each on the last
        head, _ = build_batch(deciders.ADMITTER, outputs=DECISIONS, basis_seq=basis + 1, head_seq=0, now_ms=5)
        last = await bus.last_seq()
        await bus.commit_batch(head=head, expected_head_seq=last, rest=[])
    consumer = await bind_decisions(bus)
    first = await consumer.fetch(batch=3, timeout=0.5)
    assert len(first) == 9  # nothing learned yet: three messages, three decisions each
    assert consumer.per_message > 1.0
    consumer.per_message = 3.0  # learned: three decisions a message
    second = await consumer.fetch(batch=3, timeout=0.5)
    assert len(second) == 3 and len({carried.decision_key(d)[0] for d in second}) == 1
