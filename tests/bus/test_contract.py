"""One contract suite, run on the memory bus, one nats-server and a 3-node cluster.

If a test here passes on ``memory`` and fails on ``nats`` or ``cluster`` (or the
reverse), the fake has drifted from the real log: fix the fake.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

import msgspec
import pytest

from kueue_es.events.bus import base, rules
from tests.bus.conftest import Harness

# several seconds of services or kubectl per test: .ci/run's slow stage runs them (README command under 10 minutes)
pytestmark = pytest.mark.slow


def msg(subject: str, msg_id: str, data: bytes = b"{}", **headers: str) -> base.OutgoingMessage:
    """An outgoing message; keyword headers are written with '_' as '-'."""
    return base.OutgoingMessage(
        subject=subject,
        data=data,
        msg_id=msg_id,
        headers={k.replace("_", "-"): v for k, v in headers.items()},
    )


async def collect(
    bus: base.Bus,
    count: int,
    *,
    subjects: Sequence[str] = ("kq.>",),
    start_seq: int = 1,
    timeout: float = 5.0,
) -> list[base.LogMessage]:
    """The first ``count`` messages a reader yields, or TimeoutError."""
    got: list[base.LogMessage] = []
    async with asyncio.timeout(timeout):
        async with contextlib.aclosing(bus.read(subjects=subjects, start_seq=start_seq)) as reader:
            async for message in reader:
                got.append(message)
                if len(got) == count:
                    return got
    return got


def assert_positions(harness: Harness, got: Sequence[base.LogMessage], expected: list[tuple[int, int]]) -> None:
    """``got``'s (seq, pending) are ``expected``. On a 3-node cluster a consumer's ``num_pending``
    has once stayed 2 too high (CI, nats-server 2.15.1), so there only the last message's pending
    is exact (the reader checks with the stream leader, NatsBus.read) and the others may be more."""
    said = [(m.seq, m.pending) for m in got]
    if harness.kind != "cluster":
        assert said == expected
        return
    assert [seq for seq, _ in said] == [seq for seq, _ in expected]
    assert said[-1] == expected[-1]
    assert all(p >= want for (_, p), (_, want) in zip(said, expected, strict=True)), said


async def publish_facts(bus: base.Bus, count: int, *, prefix: str = "f") -> None:
    """Publish ``count`` workload facts ``kq.in.wl.ns.<prefix><i>``."""
    for i in range(count):
        await bus.publish(msg(f"kq.in.wl.ns.{prefix}{i}", f"{prefix}:{i}"))


async def test_publish_dedups_by_msg_id(bus: base.Bus) -> None:
    """A second publish with the same msg_id is acknowledged as a duplicate with the original seq."""
    first = await bus.publish(msg("kq.in.wl.ns.a", "wl:a:1"))
    second = await bus.publish(msg("kq.in.wl.ns.b", "wl:b:1"))
    again = await bus.publish(msg("kq.in.wl.ns.a", "wl:a:1", data=b"other"))
    assert (first, second) == (base.PublishAck(seq=1), base.PublishAck(seq=2))
    assert again == base.PublishAck(seq=1, duplicate=True)
    assert await bus.last_seq() == 2


async def test_a_publish_expecting_a_subjects_last_sequence_is_stored_only_then(bus: base.Bus) -> None:
    """``expected_last_subject_seq``: stored when the subject's last message is at that sequence (0:
    none), else ConflictError and nothing stored (the dispatcher's results per record, issue 18)."""
    subject = "kq.disp.local.rec.p0.1"
    await publish_facts(bus, 1)
    first = await bus.publish(msgspec.structs.replace(msg(subject, "r:1"), expected_last_subject_seq=0))
    assert first.seq == 2
    with pytest.raises(base.ConflictError):  # someone else's result is there: expect 0 no more
        await bus.publish(msgspec.structs.replace(msg(subject, "r:2"), expected_last_subject_seq=0))
    await publish_facts(bus, 1, prefix="g")  # another subject moving does not matter
    second = await bus.publish(msgspec.structs.replace(msg(subject, "r:3"), expected_last_subject_seq=2))
    assert second.seq == 4
    with pytest.raises(base.ConflictError):
        await bus.publish(msgspec.structs.replace(msg(subject, "r:4"), expected_last_subject_seq=2))
    assert await bus.last_seq() == 4 and await bus.last_subject_seq(subject) == 4


async def test_publish_refuses_what_the_server_refuses(bus: base.Bus) -> None:
    """Subjects outside the log, wildcards, reserved headers and oversized payloads raise BusError."""
    bad = [
        msg("other.subject", "x1"),
        msg("kq.in.wl.*.a", "x2"),
        msg("kq.in.wl.ns.a", ""),
        msg("kq.in.wl.ns.a", "x3", Nats_TTL="5"),
        msg("kq.in.wl.ns.a", "x4", data=b"x" * (1 << 20)),
    ]
    for message in bad:
        with pytest.raises(base.BusError):
            await bus.publish(message)
    assert await bus.last_seq() == 0


async def test_read_from_start_counts_pending_down_to_zero(harness: Harness, bus: base.Bus) -> None:
    """A reader from seq 1 gets every message in order with pending n-1 .. 0."""
    await publish_facts(bus, 5)
    got = await collect(bus, 5)
    assert_positions(harness, got, [(1, 4), (2, 3), (3, 2), (4, 1), (5, 0)])
    assert got[0].subject == "kq.in.wl.ns.f0"
    assert got[0].data == b"{}"


async def test_a_reader_of_several_filters_is_caught_up_when_only_others_follow(bus: base.Bus) -> None:
    """With several filters, a reader's last wanted message says pending 0 even when messages it does
    not want end the log (the NATS bus reads the whole log then and filters itself: the server's
    count of what is pending includes the unwanted ones)."""
    for subject, msg_id in [
        ("kq.in.wl.ns.f0", "f0"),
        ("kq.disp.c.wl.ns.d0", "d0"),
        ("kq.in.wl.ns.f1", "f1"),
        ("kq.disp.c.wl.ns.d1", "d1"),
        ("kq.disp.c.wl.ns.d2", "d2"),
    ]:
        await bus.publish(msg(subject, msg_id))
    got = await collect(bus, 2, subjects=("kq.in.>", "kq.dec.>"))
    assert [m.seq for m in got] == [1, 3]
    assert got[0].pending > 0
    assert got[1].pending == 0
    live = asyncio.create_task(collect(bus, 3, subjects=("kq.in.>", "kq.dec.>")))
    await bus.publish(msg("kq.in.wl.ns.f2", "f2"))
    assert [(m.seq, m.pending) for m in (await live)[2:]] == [(6, 0)]


async def test_read_from_the_middle(harness: Harness, bus: base.Bus) -> None:
    """A reader from seq 3 of 5 starts at 3 and is caught up at 5."""
    await publish_facts(bus, 5)
    got = await collect(bus, 3, start_seq=3)
    assert_positions(harness, got, [(3, 2), (4, 1), (5, 0)])


async def test_read_waits_for_new_messages_on_an_empty_log(bus: base.Bus) -> None:
    """A reader on an empty log blocks, then yields each message as it is appended."""
    reader = asyncio.create_task(collect(bus, 3))
    await asyncio.sleep(0.2)
    assert not reader.done()
    await publish_facts(bus, 3)
    got = await reader
    assert [m.seq for m in got] == [1, 2, 3]
    assert got[-1].pending == 0


async def test_read_catches_up_then_follows_live(bus: base.Bus) -> None:
    """A reader drains the backlog to pending 0, then keeps yielding live messages."""
    await publish_facts(bus, 2)
    reader = asyncio.create_task(collect(bus, 4))
    await asyncio.sleep(0.2)
    await publish_facts(bus, 2, prefix="g")
    got = await reader
    assert [m.seq for m in got] == [1, 2, 3, 4]
    assert got[1].pending == 0
    assert got[-1].pending == 0


async def test_read_from_past_the_end_waits_for_that_sequence(bus: base.Bus) -> None:
    """A start_seq beyond the end yields nothing before start_seq, and is caught up at the end.

    ``pending`` of a live message is counted when it is delivered, so only the
    last one's (0) is certain here.
    """
    await publish_facts(bus, 2)
    reader = asyncio.create_task(collect(bus, 2, start_seq=5))
    await asyncio.sleep(0.2)
    await publish_facts(bus, 4, prefix="g")
    got = await reader
    assert [m.seq for m in got] == [5, 6]
    assert got[-1].pending == 0


async def test_read_filters_by_wildcards(harness: Harness, bus: base.Bus) -> None:
    """Filters with '*' and '>' select subjects; pending counts only matching messages for one filter,
    and is 0 exactly at the last matching message for several (see LogMessage)."""
    await bus.publish(msg("kq.in.wl.ns.a", "1"))
    await bus.publish(msg("kq.in.cq._.cq1", "2"))
    await bus.publish(msg("kq.disp.c1.wl.ns.a", "3"))
    await bus.publish(msg("kq.in.wl.ns.b", "4"))
    await bus.publish(msg("kq.dec.p0.head", "5"))
    workloads = await collect(bus, 2, subjects=["kq.in.wl.*.*"])
    assert_positions(harness, workloads, [(1, 1), (4, 0)])
    mixed = await collect(bus, 2, subjects=["kq.dec.*.head", "kq.disp.>"])
    assert [m.seq for m in mixed] == [3, 5]
    assert mixed[0].pending >= 1
    assert mixed[1].pending == 0
    covered = await collect(bus, 5, subjects=["kq.>", "kq.in.>"])
    assert [m.seq for m in covered] == [1, 2, 3, 4, 5]


async def test_headers_round_trip_without_protocol_headers(bus: base.Bus) -> None:
    """Readers see the caller's headers plus Nats-Msg-Id, never the bus's protocol headers."""
    await bus.publish(msg("kq.in.wl.ns.a", "h1", Kq_Type="WorkloadObserved"))
    await bus.commit_batch(
        head=msg("kq.dec.p0.head", "d1:0", Kq_Type="DecisionRecord"),
        expected_head_seq=0,
        rest=[msg("kq.dec.p0.wl.ns.a", "d1:1", Kq_Type="QuotaReserved")],
    )
    want = [
        {"Kq-Type": "WorkloadObserved", "Nats-Msg-Id": "h1"},
        {"Kq-Type": "DecisionRecord", "Nats-Msg-Id": "d1:0"},
        {"Kq-Type": "QuotaReserved", "Nats-Msg-Id": "d1:1"},
    ]
    assert [m.headers for m in await collect(bus, 3)] == want
    assert [(await bus.get(seq)).headers for seq in (1, 2, 3)] == want


async def test_commit_batch_stores_head_then_rest_contiguously(bus: base.Bus) -> None:
    """A batch on a fresh head (expected 0) lands as one contiguous run, head first."""
    await publish_facts(bus, 2)
    last = await bus.commit_batch(
        head=msg("kq.dec.p0.head", "d1:0"),
        expected_head_seq=0,
        rest=[msg("kq.dec.p0.wl.ns.f0", "d1:1"), msg("kq.dec.p0.wl.ns.f1", "d1:2")],
    )
    assert last == 5
    assert [(await bus.get(seq)).subject for seq in (3, 4, 5)] == [
        "kq.dec.p0.head",
        "kq.dec.p0.wl.ns.f0",
        "kq.dec.p0.wl.ns.f1",
    ]
    assert await bus.last_subject_seq("kq.dec.p0.head") == 3
    second = await bus.commit_batch(head=msg("kq.dec.p0.head", "d2:0"), expected_head_seq=3, rest=[])
    assert second == 6


async def test_stale_batch_is_rejected_and_stores_nothing(bus: base.Bus) -> None:
    """A batch whose expected head seq is stale raises ConflictError and leaves the log unchanged."""
    await bus.commit_batch(head=msg("kq.dec.p0.head", "d1:0"), expected_head_seq=0, rest=[])
    await publish_facts(bus, 1)
    for stale in (0, 2):
        with pytest.raises(base.ConflictError):
            await bus.commit_batch(
                head=msg("kq.dec.p0.head", f"d2:{stale}:0"),
                expected_head_seq=stale,
                rest=[msg("kq.dec.p0.wl.ns.a", f"d2:{stale}:1")],
            )
    assert await bus.last_seq() == 2
    assert await bus.last_subject_seq("kq.dec.p0.head") == 1


async def test_heads_of_other_partitions_do_not_conflict(bus: base.Bus) -> None:
    """The head check looks only at the batch's own head subject."""
    await bus.commit_batch(head=msg("kq.dec.p0.head", "a:0"), expected_head_seq=0, rest=[])
    assert await bus.commit_batch(head=msg("kq.dec.p1.head", "b:0"), expected_head_seq=0, rest=[]) == 2


HEADS = "kq.dec.p0.head.*"


async def test_a_batch_expects_the_last_sequence_on_every_head_of_its_partition(bus: base.Bus) -> None:
    """Each decider commits on its own head (``kq.dec.<p>.head.<user>``) and every batch checks one token:
    the last sequence on any head of the partition (``head_filter``, on nats-server the header
    Nats-Expected-Last-Subject-Sequence-Subject, which holds inside an ADR-50 batch too)."""
    first = await bus.commit_batch(
        head=msg("kq.dec.p0.head.admitter", "a:0"),
        expected_head_seq=0,
        rest=[msg("kq.dec.p0.wl.ns.a", "a:1")],
        head_filter=HEADS,
    )
    assert first == 2
    with pytest.raises(base.ConflictError):  # the preemptor's own head is empty, but the admitter's moved
        await bus.commit_batch(
            head=msg("kq.dec.p0.head.preemptor", "p:0"),
            expected_head_seq=0,
            rest=[msg("kq.dec.p0.wl.ns.a", "p:1")],
            head_filter=HEADS,
        )
    assert await bus.last_seq() == 2
    assert await bus.commit_batch(
        head=msg("kq.dec.p0.head.preemptor", "p2:0"),
        expected_head_seq=1,
        rest=[msg("kq.dec.p0.wl.ns.a", "p2:1")],
        head_filter=HEADS,
    ) == 4  # fmt: skip
    # another partition's heads are another token
    assert await bus.commit_batch(
        head=msg("kq.dec.p1.head.admitter", "q:0"), expected_head_seq=0, rest=[], head_filter="kq.dec.p1.head.*"
    ) == 5  # fmt: skip
    # anything on a head counts, a record or not (garbage is never a permanent fence: expect it)
    garbage = await bus.publish(msg("kq.dec.p0.head.tas-placer", "garbage"))
    assert garbage.seq == 6
    assert await bus.last_subject_seq(HEADS) == 6
    assert await bus.last_subject_seq("kq.dec.p0.head.preemptor") == 3
    assert await bus.last_subject_seq("kq.dec.*.head.*") == 6
    with pytest.raises(base.ConflictError):
        await bus.commit_batch(
            head=msg("kq.dec.p0.head.admitter", "a2:0"), expected_head_seq=3, rest=[], head_filter=HEADS
        )
    assert await bus.commit_batch(
        head=msg("kq.dec.p0.head.admitter", "a3:0"), expected_head_seq=6, rest=[], head_filter=HEADS
    ) == 7  # fmt: skip


async def test_racing_deciders_with_one_expectation_commit_one_batch(bus: base.Bus) -> None:
    """Three deciders' batches sent together on their own heads, all expecting the same token: one lands,
    the others are conflicts (a clustered stream answers those still in flight with err 10164)."""
    await bus.commit_batch(head=msg("kq.dec.p0.head.admitter", "a:0"), expected_head_seq=0, rest=[], head_filter=HEADS)
    outcomes = await asyncio.gather(
        *[
            bus.commit_batch(
                head=msg(f"kq.dec.p0.head.{user}", f"{user}:0"),
                expected_head_seq=1,
                rest=[msg("kq.dec.p0.wl.ns.r", f"{user}:1")],
                head_filter=HEADS,
            )
            for user in ("admitter", "preemptor", "tas-placer")
        ],
        return_exceptions=True,
    )
    assert sorted(type(o).__name__ for o in outcomes) == ["ConflictError", "ConflictError", "int"], outcomes
    assert await bus.last_seq() == 3


async def test_facts_published_together_land_together_each_on_its_subject(harness: Harness, bus: base.Bus) -> None:
    """publish_together stores the facts contiguously, each on its own subject with its own Msg-Id, and a reader
    is delivered the first with the others pending behind it (a decider waits for them before a cycle)."""
    await publish_facts(bus, 1)
    last = await bus.publish_together([msg("kq.in.wl.ns.a", "a:1"), msg("kq.in.wl.ns.b", "b:1")])
    assert last == 3
    assert [(await bus.get(seq)).subject for seq in (2, 3)] == ["kq.in.wl.ns.a", "kq.in.wl.ns.b"]
    got = await collect(bus, 3)
    assert [m.headers.get("Nats-Msg-Id") for m in got[1:]] == ["a:1", "b:1"]
    assert_positions(harness, got, [(1, 2), (2, 1), (3, 0)])


async def test_facts_published_together_are_refused_whole_when_one_is_stored(bus: base.Bus) -> None:
    """One Msg-Id on the log already refuses the whole batch (DuplicateBatchError): nothing stored, so the
    publisher sends them one by one, each deduplicated."""
    await bus.publish(msg("kq.in.wl.ns.a", "a:1"))
    with pytest.raises(base.DuplicateBatchError):
        await bus.publish_together([msg("kq.in.wl.ns.b", "b:1"), msg("kq.in.wl.ns.a", "a:1")])
    assert await bus.last_seq() == 1


async def test_duplicate_batch_is_rejected_whole(bus: base.Bus) -> None:
    """One stored msg_id rejects the whole batch; a retried landed batch is a duplicate, not a conflict."""
    await bus.publish(msg("kq.in.wl.ns.a", "fact:a"))
    with pytest.raises(base.DuplicateBatchError):
        await bus.commit_batch(
            head=msg("kq.dec.p0.head", "d1:0"),
            expected_head_seq=0,
            rest=[msg("kq.dec.p0.wl.ns.b", "d1:1"), msg("kq.in.wl.ns.a", "fact:a")],
        )
    assert await bus.last_seq() == 1
    batch = {"head": msg("kq.dec.p0.head", "d2:0"), "rest": [msg("kq.dec.p0.wl.ns.b", "d2:1")]}
    assert await bus.commit_batch(expected_head_seq=0, **batch) == 3  # type: ignore[arg-type]
    with pytest.raises(base.DuplicateBatchError):
        await bus.commit_batch(expected_head_seq=0, **batch)  # type: ignore[arg-type]
    assert await bus.last_seq() == 3


async def test_a_head_alone_is_a_batch_like_any_other(bus: base.Bus) -> None:
    """A record without outputs (39 % of the commits of an uncapped baseline bench) keeps a
    batch's outcomes: its head expectation, and a repeat of a landed one stores nothing (a
    duplicate, or the conflict it also is: its own landing moved the head)."""
    head = msg("kq.dec.p0.head.admitter", "h:0")
    assert await bus.commit_batch(head=head, expected_head_seq=0, rest=[], head_filter=HEADS) == 1
    assert (await bus.get(1)).headers == {"Nats-Msg-Id": "h:0"}  # no protocol header shows
    with pytest.raises((base.DuplicateBatchError, base.ConflictError)):
        await bus.commit_batch(head=head, expected_head_seq=0, rest=[], head_filter=HEADS)
    assert await bus.last_seq() == 1
    with pytest.raises(base.ConflictError):  # another record on the same stale expectation
        await bus.commit_batch(head=msg("kq.dec.p0.head.admitter", "h2:0"), expected_head_seq=0, rest=[])
    await bus.publish(msg("kq.dec.p0.head.preemptor", "other:0"))  # any head of the partition moves it
    with pytest.raises(base.ConflictError):
        await bus.commit_batch(
            head=msg("kq.dec.p0.head.admitter", "h3:0"), expected_head_seq=1, rest=[], head_filter=HEADS
        )
    assert await bus.last_seq() == 2
    assert await bus.commit_batch(
        head=msg("kq.dec.p0.head.admitter", "h4:0"), expected_head_seq=2, rest=[], head_filter=HEADS
    ) == 3  # fmt: skip


async def test_batch_over_the_limit_is_refused(bus: base.Bus) -> None:
    """More than 999 messages after the head raise BusError before anything is stored."""
    rest = [msg("kq.dec.p0.wl.ns.a", f"d:{i}") for i in range(1, 1001)]
    with pytest.raises(base.BusError):
        await bus.commit_batch(head=msg("kq.dec.p0.head", "d:0"), expected_head_seq=0, rest=rest)
    assert await bus.last_seq() == 0


async def test_get_last_seq_and_last_subject_seq(bus: base.Bus) -> None:
    """An empty log answers 0 and NotFoundError; then get/last_seq/last_subject_seq agree with publishes."""
    assert await bus.last_seq() == 0
    assert await bus.last_subject_seq("kq.in.wl.ns.a") == 0
    with pytest.raises(base.NotFoundError):
        await bus.get(1)
    await bus.publish(msg("kq.in.wl.ns.a", "1", data=b"one"))
    await bus.publish(msg("kq.in.wl.ns.b", "2"))
    await bus.publish(msg("kq.in.wl.ns.a", "3", data=b"three"))
    assert await bus.last_seq() == 3
    assert await bus.last_subject_seq("kq.in.wl.ns.a") == 3
    assert await bus.last_subject_seq("kq.in.wl.ns.b") == 2
    got = await bus.get(1)
    assert (got.seq, got.subject, got.data, got.pending) == (1, "kq.in.wl.ns.a", b"one", 0)
    for missing in (0, 4):
        with pytest.raises(base.NotFoundError):
            await bus.get(missing)


async def test_durable_fetch_returns_empty_on_timeout(bus: base.Bus) -> None:
    """fetch on a consumer with nothing to deliver returns [] after its timeout."""
    consumer = await bus.durable(name="dispatcher", subjects=["kq.dec.*.wl.>"])
    await publish_facts(bus, 1)
    assert await consumer.fetch(batch=10, timeout=0.3) == []


async def _fetch_at_least(consumer: base.DurableConsumer, count: int) -> list[base.Delivery]:
    """Fetch until ``count`` deliveries came, never more (or until a fetch comes back empty). One fetch takes what its
    first delivery says is pending, and on a 3-node cluster a message stored just before may not
    be counted there yet: the next fetch gets it."""
    got: list[base.Delivery] = []
    while len(got) < count:
        more = await consumer.fetch(batch=count - len(got), timeout=2)
        if not more:
            break
        got += more
    return got


async def test_durable_ack_nak_and_redelivery(bus: base.Bus) -> None:
    """Acked messages are gone; a nak'ed one comes back at once; an unacked one after ack_wait."""
    consumer = await bus.durable(name="dispatcher", subjects=["kq.in.wl.>"], ack_wait=1.0)
    await publish_facts(bus, 3)
    await bus.publish(msg("kq.in.cq._.x", "cq"))
    first = await _fetch_at_least(consumer, 3)
    # pending is the server's count when it sent each message: on a cluster it may already
    # be 0 for all of them, so only the last one's value is part of the contract
    assert [(d.message.seq, d.attempt) for d in first] == [(1, 1), (2, 1), (3, 1)]
    assert first[-1].message.pending == 0
    await consumer.ack(first[0])
    await consumer.nak(first[1])
    again = await consumer.fetch(batch=10, timeout=2)
    assert [(d.message.seq, d.attempt) for d in again] == [(2, 2)]
    await consumer.ack(again[0])
    late = await consumer.fetch(batch=10, timeout=3)
    assert [(d.message.seq, d.attempt) for d in late] == [(3, 2)]
    await consumer.ack(late[0])
    await consumer.ack(late[0])
    assert await consumer.fetch(batch=10, timeout=0.8) == []


async def test_durable_nak_with_delay(bus: base.Bus) -> None:
    """A nak with a delay is redelivered only after that delay."""
    consumer = await bus.durable(name="dispatcher", subjects=["kq.in.>"], ack_wait=30)
    await publish_facts(bus, 1)
    (delivery,) = await consumer.fetch(batch=10, timeout=2)
    await consumer.nak(delivery, delay=0.6)
    assert await consumer.fetch(batch=10, timeout=0.3) == []
    (again,) = await consumer.fetch(batch=10, timeout=2)
    assert (again.message.seq, again.attempt) == (1, 2)


async def test_durable_resumes_after_rebind(harness: Harness, bus: base.Bus) -> None:
    """Binding the same durable name from another connection resumes after the last ack."""
    consumer = await bus.durable(name="dispatcher", subjects=["kq.in.>"], ack_wait=30)
    await publish_facts(bus, 3)
    for delivery in await _fetch_at_least(consumer, 2):
        await consumer.ack(delivery)
    await bus.close()
    other = await harness.open()
    rebound = await other.durable(name="dispatcher", subjects=["kq.in.>"], ack_wait=30)
    await publish_facts(other, 1, prefix="g")
    got = await _fetch_at_least(rebound, 2)
    assert [(d.message.seq, d.attempt) for d in got] == [(3, 1), (4, 1)]


async def test_durables_with_different_names_are_independent(bus: base.Bus) -> None:
    """Two durable consumers each get every matching message."""
    one = await bus.durable(name="one", subjects=["kq.in.>"])
    two = await bus.durable(name="two", subjects=["kq.in.wl.ns.f1"])
    await publish_facts(bus, 2)
    assert [d.message.seq for d in await _fetch_at_least(one, 2)] == [1, 2]
    assert [d.message.seq for d in await two.fetch(batch=10, timeout=2)] == [2]


async def test_closed_bus_refuses_work(harness: Harness) -> None:
    """After close, a reader waiting for messages stops with BusError, and the log stays for others."""
    bus = await harness.open()
    await publish_facts(bus, 1)
    reader = asyncio.create_task(collect(bus, 2))
    await asyncio.sleep(0.2)
    await bus.close()
    with pytest.raises(base.BusError):
        await reader
    other = await harness.open()
    assert await other.last_seq() == 1


async def test_durable_holds_back_beyond_max_ack_pending(bus: base.Bus) -> None:
    """With MAX_ACK_PENDING deliveries unacked, nothing new comes until one is acked."""
    for batch in range(2):
        await bus.commit_batch(
            head=msg("kq.dec.p0.head", f"d{batch}:0"),
            expected_head_seq=0 if batch == 0 else 1,
            rest=[msg(f"kq.dec.p0.wl.ns.w{i}", f"d{batch}:{i}") for i in range(1, 1000)],
        )
    consumer = await bus.durable(name="dispatcher", subjects=["kq.dec.*.wl.>"])
    delivered: list[base.Delivery] = []
    while len(delivered) < rules.MAX_ACK_PENDING:
        got = await consumer.fetch(batch=500, timeout=2)
        assert got, f"stalled after {len(delivered)} deliveries"
        delivered.extend(got)
    assert len(delivered) == rules.MAX_ACK_PENDING
    assert await consumer.fetch(batch=10, timeout=0.3) == []
    await consumer.ack(delivered[0])
    (next_one,) = await consumer.fetch(batch=10, timeout=2)
    assert [d.message.seq for d in delivered[-2:]] == [1000, 1002]
    assert next_one.message.seq == 1003
