"""The publisher on a nats-server: KQ_PUB written from the verified log, exactly once across restarts.

The log is tests/publisher_log.py's (a verified batch, a forged one, a stray decision, facts, a dispatch
result), in the old layout (``OLD``: records followed by their output messages) and in event schema 17
(records carrying their decisions); the publisher runs as the service runs it (:class:`Publisher` over a NatsBus) and is stopped and
started again, or run twice at once.
"""

from __future__ import annotations

import asyncio
import contextlib

import nats
import pytest

from kueue_es import deciders
from kueue_es.events import codec, types
from kueue_es.events.bus import base
from kueue_es.events.bus import nats as nats_bus
from kueue_es.services import runtime
from kueue_es.services.publisher import core
from kueue_es.services.publisher.service import Publisher
from tests import publisher_log
from tests.bus.conftest import Harness

PUBLIC = 6  # tests/publisher_log.py: #4, #5, #6, #7, #11, #12 (schema 17: #4, #5 and its two decisions, #8, #9)
OLD = 16  # the last schema version whose records are followed by their output messages


async def public_messages(harness: Harness) -> list[nats.aio.msg.Msg]:
    """Everything on KQ_PUB, read as an outside subscriber reads it."""
    nc = await nats.connect(harness.urls)
    try:
        info = await nc.jsm().stream_info(nats_bus.PUBLIC_STREAM_NAME)
        count = int(info.state.messages or 0)
        out = []
        if count:
            sub = await nc.jetstream().subscribe("kq.pub.>", ordered_consumer=True)
            for _ in range(count):
                out.append(await sub.next_msg(timeout=10))
            await sub.unsubscribe()
        return out
    finally:
        await nc.close()


async def write_log(bus: base.Bus, messages: list[base.OutgoingMessage]) -> None:
    for message in messages:
        await bus.publish(message)


@contextlib.asynccontextmanager
async def running(bus: base.Bus):  # type: ignore[no-untyped-def]
    publisher = Publisher(bus=bus)
    task = asyncio.create_task(publisher.run())
    try:
        yield publisher
    finally:
        await runtime.cancel_and_wait([task])


async def wait_published(bus: nats_bus.NatsBus, count: int, *, timeout: float = 20.0) -> None:
    async with asyncio.timeout(timeout):
        while True:
            last = await bus.last_public()
            if last is not None and last.seq >= count:
                return
            await asyncio.sleep(0.05)


@pytest.mark.parametrize("harness", ["nats"], indirect=True)
async def test_publishes_the_verified_log_once_across_restarts(harness: Harness) -> None:
    """KQ_PUB gets the workload's facts, the verified record and its outputs and the dispatch result, in
    log order, never the forged or stray decisions; a publisher stopped and started again (twice, the
    second time after more was logged) adds only what is new."""
    bus = await harness.open()
    assert isinstance(bus, nats_bus.NatsBus)
    await bus.ensure_public_stream()
    await write_log(bus, publisher_log.messages(schema_version=OLD))
    async with running(bus) as publisher:
        await wait_published(bus, PUBLIC)
        async with asyncio.timeout(10):
            while not publisher.caught_up:
                await asyncio.sleep(0.05)
    first = await public_messages(harness)
    assert [int(m.headers["Kq-Seq"]) for m in first] == [4, 5, 6, 7, 11, 12]
    assert [m.headers["Kq-Type"] for m in first] == [
        "WorkloadObserved",
        "DecisionRecord",
        "QuotaReserved",
        "WorkloadAdmitted",
        "DispatchApplied",
        "WorkloadFinished",
    ]
    assert all(m.headers["ce-specversion"] == "1.0" and m.headers["content-type"] == "application/json" for m in first)
    assert all(m.headers["Nats-Msg-Id"] == m.headers["ce-id"] for m in first)
    assert first[2].subject == "kq.pub.wl.team-a.w%2E1" and first[2].headers["Kq-Record-Seq"] == "5"
    async with running(bus):  # nothing new: nothing more
        await asyncio.sleep(1.5)
    assert len(await public_messages(harness)) == PUBLIC
    # more on the log: a second admitter batch (w4) and its dispatch result
    head, rest = runtime.build_batch(
        deciders.ADMITTER,
        outputs=publisher_log.reserved("w4"),
        basis_seq=12,
        head_seq=5,
        now_ms=publisher_log.NOW_MS + 1000,
        schema_version=OLD,
    )
    await write_log(bus, [head, *rest])
    async with running(bus):
        await wait_published(bus, PUBLIC + 3)
        await asyncio.sleep(1.0)
    after = await public_messages(harness)
    assert [m.headers["Kq-Seq"] for m in after] == [m.headers["Kq-Seq"] for m in first] + ["13", "14", "15"]
    assert len({m.headers["Nats-Msg-Id"] for m in after}) == len(after)


@pytest.mark.parametrize("harness", ["nats"], indirect=True)
async def test_resumes_inside_a_batch_and_two_publishers_write_once(harness: Harness) -> None:
    """A KQ_PUB that holds the record and one output of a batch (a publisher stopped there): the next
    publisher writes the other output and what follows, nothing twice. Two publishers at once (a rollout)
    write every message once: the Msg-Ids are the log's, JetStream dedupes."""
    bus = await harness.open()
    assert isinstance(bus, nats_bus.NatsBus)
    await bus.ensure_public_stream()
    outgoing = publisher_log.messages(schema_version=OLD)
    await write_log(bus, outgoing)
    log = publisher_log.stored(outgoing)
    for seq, record in ((4, None), (5, None), (6, None)):  # the fact, the record, its first output
        stored = log[seq - 1]
        event = codec.decode(stored.data)
        ref = core.record_ref(5, log[4].data, codec.decode(log[4].data)) if seq >= 5 else record
        public = core.public_message(stored, event, record=ref, time_ms=core.event_time_ms(event) or 1)
        assert public is not None
        await bus.publish_public(public)
    other = await harness.open()
    async with running(bus), running(other):
        await wait_published(bus, PUBLIC)
        await asyncio.sleep(1.5)
    got = await public_messages(harness)
    assert [int(m.headers["Kq-Seq"]) for m in got] == [4, 5, 6, 7, 11, 12]
    assert got[3].headers["Kq-Type"] == "WorkloadAdmitted" and got[3].headers["Kq-Record-Seq"] == "5"
    assert isinstance(codec.decode(got[3].data), types.WorkloadAdmitted)


@pytest.mark.parametrize("harness", ["nats"], indirect=True)
async def test_resumes_inside_a_record_carrying_decisions(harness: Harness) -> None:
    """Schema 17: a KQ_PUB that holds the record and the first of the two decisions it carries (a publisher
    stopped there): the next publishers (two at once) write the second decision and what follows, nothing
    twice, each decision on its workload's subject with the record's Kq-Seq and its Kq-Entry."""
    bus = await harness.open()
    assert isinstance(bus, nats_bus.NatsBus)
    await bus.ensure_public_stream()
    outgoing = publisher_log.messages(schema_version=types.SCHEMA_VERSION)
    await write_log(bus, outgoing)
    log = publisher_log.stored(outgoing)
    fact = log[3]
    head = log[4]
    record = codec.decode(head.data)
    assert isinstance(record, types.DecisionRecord) and len(record.carried) == 2
    [observed] = core.public_messages(fact, codec.decode(fact.data), record=None, time_ms=1)
    published = core.public_messages(head, record, record=None, time_ms=record.now_ms)
    for public in (observed, *published[:2]):  # the fact, the record, its first decision
        await bus.publish_public(public)
    other = await harness.open()
    async with running(bus), running(other):
        await wait_published(bus, PUBLIC)
        await asyncio.sleep(1.5)
    got = await public_messages(harness)
    assert [int(m.headers["Kq-Seq"]) for m in got] == [4, 5, 5, 5, 8, 9]
    assert [m.headers["Nats-Msg-Id"] for m in got[1:4]] == [f"{record.decision_id}:{i}" for i in range(3)]
    assert [m.headers.get("Kq-Entry") for m in got] == [None, "0/2", "1/2", "2/2", None, None]
    assert [m.subject for m in got[2:4]] == ["kq.pub.wl.team-a.w%2E1"] * 2
    assert got[3].data == codec.encode(record.carried[1])
