"""The dispatcher's results per record on every bus kind: a refused publish reads the record's
subject back (an ordered consumer on NATS) and answers only what is not answered there."""

from __future__ import annotations

from kueue_es.events import codec, subjects, types
from kueue_es.events.bus import base
from kueue_es.services.dispatcher.record_results import RecordResults


def entry(seq: int) -> types.DispatchEntry:
    return types.DispatchEntry(
        decision_seq=seq, workload=types.WorkloadRef(namespace="ns", name=f"w{seq}"), action="StartJob"
    )


async def test_a_refused_result_reads_the_record_and_answers_the_rest(bus: base.Bus) -> None:
    for i in range(3):  # the record at #3 (as far as its results care)
        await bus.publish(subjects.fact_message(types.ObjectDeleted(kind="Workload", namespace="ns", name=f"x{i}")))
    before = RecordResults(bus=bus, cluster="local")  # the holder before a takeover
    await before.publish("p0", 3, [entry(4), entry(5)])
    await bus.publish(subjects.fact_message(types.ObjectDeleted(kind="Workload", namespace="ns", name="y")))
    after = RecordResults(bus=bus, cluster="local")
    await after.publish("p0", 3, [entry(4), entry(5), entry(6)])
    assert (after.refused, after.answered_before, after.published) == (1, 2, 1)
    subject = subjects.record_dispatch_subject("p0", 3)
    answered = []
    for seq in range(1, await bus.last_seq() + 1):
        message = await bus.get(seq)
        if message.subject == subject:
            answered += [r.decision_seq for r in types.dispatch_results(codec.decode(message.data))]
    assert answered == [4, 5, 6]
