"""The dispatcher's durable consumer on every bus: a consumer made before event schema 17 (over the per-workload
decision subjects alone) is brought to the records' heads too when bound again, keeps its position, and hands
over the decisions a record carries (services/dispatcher/carried.py)."""

from __future__ import annotations

from kueue_es import deciders
from kueue_es.events import subjects, types
from kueue_es.events.bus import base
from kueue_es.services.dispatcher import carried
from kueue_es.services.dispatcher.service import bind_decisions
from kueue_es.services.runtime import build_batch


def admitted(name: str) -> types.WorkloadAdmitted:
    return types.WorkloadAdmitted(
        workload=types.WorkloadRef(namespace="default", name=name, uid=f"uid-{name}"), cluster_queue="cq", at_ms=5
    )


async def test_an_old_durable_is_given_the_heads_and_keeps_its_position(bus: base.Bus) -> None:
    old = await bus.durable(name="dispatcher", subjects=(carried.DECISION_FILTER,), ack_wait=5)
    # an older log's batch: the record, then its output message, which the old consumer delivers and acks
    head, rest = build_batch(
        deciders.ADMITTER, outputs=[admitted("old")], basis_seq=0, head_seq=0, now_ms=5, schema_version=16
    )
    first = await bus.commit_batch(head=head, expected_head_seq=0, rest=rest, head_filter=subjects.heads_of())
    [delivery] = await old.fetch(batch=10, timeout=2)
    assert delivery.message.seq == first
    await old.ack(delivery)
    await old.close()
    # a schema-17 record after it: the consumer bound again gets it, carried decisions one by one
    head, rest = build_batch(
        deciders.ADMITTER, outputs=[admitted("a"), admitted("b")], basis_seq=first, head_seq=first - 1, now_ms=6
    )
    record = await bus.commit_batch(head=head, expected_head_seq=first - 1, rest=rest, head_filter=subjects.heads_of())
    consumer = await bind_decisions(bus, ack_wait=5)
    deliveries = await consumer.fetch(batch=10, timeout=2)
    assert [carried.decision_key(d) for d in deliveries] == [(record, 1), (record, 2)]
    assert [d.message.subject for d in deliveries] == [
        subjects.workload_decision_subject(admitted(n).workload) for n in ("a", "b")
    ]
    for delivery in deliveries:
        await consumer.ack(delivery)
    assert consumer.acked_records == 1
    assert await consumer.fetch(batch=10, timeout=0.5) == []
    await consumer.close()
