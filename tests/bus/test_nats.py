"""What only the JetStream bus has: the stream's configuration, the public stream, connecting."""

from __future__ import annotations

import asyncio
from contextlib import aclosing
from pathlib import Path

import nats
import pytest

from kueue_es.events.bus import base, server
from kueue_es.events.bus import nats as nats_bus
from tests.bus.conftest import Harness

NATS_KINDS = ["nats", pytest.param("cluster", marks=pytest.mark.cluster)]


def msg(subject: str, msg_id: str, data: bytes = b"{}") -> base.OutgoingMessage:
    """An outgoing message without extra headers."""
    return base.OutgoingMessage(subject=subject, data=data, msg_id=msg_id)


@pytest.mark.parametrize("harness", NATS_KINDS, indirect=True)
async def test_log_stream_is_configured_as_designed(harness: Harness) -> None:
    """KQ_LOG is a file-backed limits log with discard=new, atomic batches and the requested replicas."""
    bus = await harness.open()
    again = await harness.open()
    assert isinstance(again, nats_bus.NatsBus)
    nc = await nats.connect(harness.urls)
    try:
        config = (await nc.jsm().stream_info(base.STREAM_NAME)).config
    finally:
        await nc.close()
    assert isinstance(bus, nats_bus.NatsBus)
    assert config.subjects == list(base.STREAM_SUBJECTS)
    assert (config.num_replicas, config.duplicate_window) == (harness.replicas, 600)
    assert config.discard == nats.js.api.DiscardPolicy.NEW
    assert config.retention == nats.js.api.RetentionPolicy.LIMITS
    assert config.storage == nats.js.api.StorageType.FILE
    assert config.allow_atomic and config.allow_direct and config.deny_delete
    assert not config.deny_purge  # purged below a verified snapshot, by the compactor only (permissions.py)
    assert config.max_msg_size == 1 << 20


@pytest.mark.parametrize("harness", NATS_KINDS, indirect=True)
async def test_log_refuses_message_delete(harness: Harness) -> None:
    """The log is the audit trail: the server refuses to delete one of its messages (purges below a
    snapshot are the compactor's, kept to it by permissions: tests/bus/test_snapshots.py)."""
    bus = await harness.open()
    for i in range(3):
        await bus.publish(msg(f"kq.in.wl.default.w{i}", f"w{i}"))
    nc = await nats.connect(harness.urls)
    try:
        jsm = nc.jsm()
        with pytest.raises(nats.js.errors.APIError, match="delete not permitted"):
            await jsm.delete_msg(base.STREAM_NAME, 2)
        state = (await jsm.stream_info(base.STREAM_NAME)).state
    finally:
        await nc.close()
    assert (state.first_seq, state.last_seq, state.messages) == (1, 3, 3)
    assert [m.seq for m in [await bus.get(s) for s in (1, 2, 3)]] == [1, 2, 3]


@pytest.mark.parametrize("harness", NATS_KINDS, indirect=True)
async def test_an_existing_log_with_deny_purge_keeps_it(harness: Harness) -> None:
    """A KQ_LOG created with deny_purge (by a kueue-es before snapshots) still opens: the server
    cannot lift deny_purge, so it keeps it (retention never purges it); message deletes stay refused."""
    nc = await nats.connect(harness.urls)
    try:
        jsm = nc.jsm()
        old = nats_bus._log_config(harness.replicas)
        old.deny_purge = True
        await jsm.add_stream(old)
        await harness.open()
        config = (await jsm.stream_info(base.STREAM_NAME)).config
    finally:
        await nc.close()
    assert config.deny_purge and config.deny_delete


@pytest.mark.parametrize("harness", NATS_KINDS, indirect=True)
async def test_public_stream_is_written_not_sourced(harness: Harness) -> None:
    """KQ_PUB holds only what is published to it (the publisher: services/publisher): no source from the
    log, so a decision committed on KQ_LOG is not there by itself; a KQ_PUB of before the publisher,
    sourced through a subject transform, loses its source. A repeated Msg-Id is stored once, and the
    last message says where the publisher stands."""
    bus = await harness.open()
    assert isinstance(bus, nats_bus.NatsBus)
    nc = await nats.connect(harness.urls)
    try:
        jsm = nc.jsm()
        old = nats_bus._public_config(harness.replicas)
        transform = nats.js.api.SubjectTransform(
            src="kq.dec.*.wl.*.*", dest="kq.pub.wl.{{wildcard(2)}}.{{wildcard(3)}}"
        )
        old.sources = [nats.js.api.StreamSource(name=base.STREAM_NAME, subject_transforms=[transform])]
        await jsm.add_stream(old)
        await bus.ensure_public_stream()
        await bus.ensure_public_stream()
        config = (await jsm.stream_info(nats_bus.PUBLIC_STREAM_NAME)).config
        assert not config.sources
        assert config.subjects == ["kq.pub.>"] and config.duplicate_window == 600
        assert config.num_replicas == harness.replicas
        await bus.commit_batch(
            head=msg("kq.dec.p0.head.admitter", "d1:0"),
            expected_head_seq=0,
            rest=[msg("kq.dec.p0.wl.ns1.job-a", "d1:1", data=b'{"type":"QuotaReserved"}')],
        )
        assert await bus.last_public() is None
        first = await bus.publish_public(msg("kq.pub.wl.ns1.job-a", "d1:1", data=b"{}"))
        again = await bus.publish_public(msg("kq.pub.wl.ns1.job-a", "d1:1", data=b"{}"))
        assert (first.seq, again.seq, again.duplicate) == (1, 1, True)
        last = await bus.last_public()
        assert last is not None and (last.seq, last.subject, last.headers["Nats-Msg-Id"]) == (
            1,
            "kq.pub.wl.ns1.job-a",
            "d1:1",
        )
        with pytest.raises(base.BusError, match="not a literal subject of KQ_PUB"):
            await bus.publish_public(msg("kq.in.wl.ns1.job-a", "x"))
    finally:
        await nc.close()


async def test_connect_to_nowhere_raises_bus_error() -> None:
    """Connecting to a port with no server gives up within seconds with BusError."""
    (port,) = server.free_ports(1)
    with pytest.raises(base.BusError, match="Connecting"):
        await nats_bus.connect(f"nats://127.0.0.1:{port}", timeout=1)


async def test_log_survives_a_server_restart_on_the_same_store(tmp_path: Path) -> None:
    """A server restarted on the same store dir still holds the log and the dedup ids."""
    async with server.NatsServer(tmp_path) as first:
        bus = await nats_bus.connect(first.url)
        await bus.publish(msg("kq.in.wl.ns.a", "fact:a"))
        await bus.close()
    async with server.NatsServer(tmp_path) as second:
        bus = await nats_bus.connect(second.url)
        try:
            assert await bus.last_seq() == 1
            assert await bus.publish(msg("kq.in.wl.ns.a", "fact:a")) == base.PublishAck(seq=1, duplicate=True)
        finally:
            await bus.close()


async def test_a_publish_that_times_out_is_tried_again_and_stored_once(nats_server: server.NatsServer) -> None:
    """A busy server's slow ack (nats: timeout) is tried again, not raised: a dispatcher that exited on
    one lost a whole large-scale bench run. The Msg-Id makes a repeat of a stored message a duplicate."""
    bus = await nats_bus.connect(nats_server.url)
    try:
        real = bus._js.publish
        calls = 0

        async def slow_once(*args, **kwargs):
            nonlocal calls
            calls += 1
            ack = await real(*args, **kwargs)  # stored, but the ack is "lost"
            if calls == 1:
                raise nats.errors.TimeoutError
            return ack

        bus._js.publish = slow_once  # type: ignore[method-assign]
        message = base.OutgoingMessage(
            subject="kq.in.wl.default.a", data=b'{"type":"X"}', msg_id="timeout-test-1", headers={}
        )
        ack = await bus.publish(message)
        assert calls == 2 and ack.duplicate
        assert await bus.last_seq() == ack.seq
    finally:
        await bus.close()


@pytest.mark.parametrize("harness", ["nats"], indirect=True)
async def test_a_durable_fetch_takes_queued_messages_without_a_task_each(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fetched batch comes whole and in order, and only a wait for a message not yet there goes through
    nats-py's next_msg (a task and a uuid4 each): nats-py alone made one per message of the batch."""
    import nats.aio.subscription

    bus = await harness.open()
    for i in range(40):
        await bus.publish(msg(f"kq.dec.p0.wl.default.w{i}", f"d{i}"))
    durable = await bus.durable(name="fast-fetch", subjects=("kq.dec.>",))
    waits = []
    real_uuid4 = nats.aio.subscription.uuid4

    def counted() -> object:
        waits.append(1)
        return real_uuid4()

    monkeypatch.setattr(nats.aio.subscription, "uuid4", counted)
    got: list[base.Delivery] = []
    while len(got) < 40:
        batch = await durable.fetch(batch=40, timeout=5.0)
        assert batch, "no message within 5 s"
        got += batch
        for delivery in batch:
            await durable.ack(delivery)
    assert [d.message.seq for d in got] == list(range(1, 41))
    assert [d.message.subject for d in got] == [f"kq.dec.p0.wl.default.w{i}" for i in range(40)]
    assert len(waits) <= 8, f"{len(waits)} waits in nats-py's next_msg for 40 messages"
    assert isinstance(durable, nats_bus.NatsDurable)
    assert durable._sub._sub._pending_size == 0 and durable._sub._sub._pending_queue.empty()
    assert await durable.fetch(batch=10, timeout=0.2) == []
    await durable.close()


@pytest.mark.parametrize("harness", ["nats"], indirect=True)
@pytest.mark.parametrize("subjects", [("kq.>",), ("kq.in.>",), ("kq.in.>", "kq.dec.>")])
async def test_a_reader_is_caught_up_even_when_the_server_overcounts_pending(
    harness: Harness, monkeypatch: pytest.MonkeyPatch, subjects: tuple[str, ...]
) -> None:
    """A consumer whose ``num_pending`` stays too high (a 3-node cluster's slow-stage CI run once said
    2 too many from seq 3 of 5 on) still yields the log's last message with pending 0, once the stream
    leader says nothing follows it, and counts right after that (a new consumer)."""
    bus = await harness.open()
    for i in range(5):
        await bus.publish(msg(f"kq.in.wl.ns.f{i}", f"f{i}"))
    real_position = nats_bus._position
    overcounting = [True]

    def miscounted(message: object) -> tuple[int, int]:
        seq, pending = real_position(message)  # type: ignore[arg-type]
        return seq, pending + 2 if overcounting[0] else pending

    monkeypatch.setattr(nats_bus, "_position", miscounted)
    got: list[base.LogMessage] = []
    async with asyncio.timeout(10):
        async with aclosing(bus.read(subjects=subjects, start_seq=3)) as messages:
            async for message in messages:
                got.append(message)
                if message.seq == 5:
                    overcounting[0] = False  # the consumer made again counts right
                    await bus.publish(msg("kq.in.wl.ns.f5", "f5"))
                if message.seq == 6:
                    break
    assert [(m.seq, m.pending) for m in got] == [(3, 4), (4, 3), (5, 0), (6, 0)]
