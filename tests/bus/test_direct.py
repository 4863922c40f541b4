"""Reading the log in Direct Get batches (kueue_es.events.bus.direct) on a real nats-server: the
same messages, headers and pending counts as nats-py's ordered consumer; a user the server does
not let use Direct Get gets DirectUnavailable (replay then reads through nats-py); and
``replay --store --jobs 2`` (forked parts, no checkpoints) finds what one pass finds.

Each case writes the recorded preemption demo (tests/fixtures/logs/demo-preempt.jsonl) into a
fresh store, as tests/bus/test_replay_cli.py does.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import msgspec
import pytest

from kueue_es.cli import main
from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus.base import LogMessage
from kueue_es.events.bus.direct import DirectReader, DirectUnavailable
from kueue_es.events.bus.server import LocalAuth, NatsServer, open_stopped_store
from kueue_es.replay import HEADS, stream_log
from tests.bus.test_replay_cli import golden, make_store


def report_lines(out: str) -> list[str]:
    """The report of ``kueue-es replay``, without the nats-server's log lines."""
    return [line for line in out.splitlines() if not line.startswith("20")]


def fields(messages: list[LogMessage]) -> list[tuple[int, str, bytes, dict[str, str], int]]:
    return [(m.seq, m.subject, m.data, m.headers, m.pending) for m in messages]


async def _both(store: Path) -> tuple[list[list[LogMessage]], list[list[LogMessage]]]:
    async with open_stopped_store(store) as server:

        def direct() -> list[list[LogMessage]]:
            with DirectReader(server.url, batch=7) as reader:  # small batches: many requests
                last = reader.last_seq()
                return [
                    list(reader.messages(last=last)),
                    list(reader.messages(last=last, subject=HEADS)),
                    list(reader.messages(last=last, start_seq=40)),
                    list(reader.messages(last=30)),
                ]

        from_direct = await asyncio.to_thread(direct)
        bus = await nats_bus.connect(server.url, create_stream=False)
        try:
            last = await bus.last_seq()
            from_nats_py = [
                [m async for m in stream_log(bus, last=last)],
                [m async for m in stream_log(bus, last=last, filters=(HEADS,))],
                [m async for m in stream_log(bus, last=last, start_seq=40)],
            ]
        finally:
            await bus.close()
    return from_direct, from_nats_py


def test_both_readers_give_each_message_the_time_it_was_stored(tmp_path: Path) -> None:
    """``LogMessage.time_ms`` is the message's stored time (Nats-Time-Stamp) from Direct Get, nats-py's
    ordered consumer and ``get`` alike: the tools' time of an event that carries none (found by a new
    user's trial: explain showed an ObjectDeleted at the previous event's time)."""
    before = int(time.time() * 1000)
    store = make_store(tmp_path, golden())
    after = int(time.time() * 1000)
    (everything, *_), (by_consumer, *_) = asyncio.run(_both(store))
    stamps = [m.time_ms for m in everything]
    assert all(before - 1 <= ms <= after + 1 for ms in stamps), (before, stamps[:3], after)
    assert stamps == sorted(stamps)
    assert [m.time_ms for m in by_consumer] == stamps

    async def got() -> int:
        async with open_stopped_store(store) as server:
            bus = await nats_bus.connect(server.url, create_stream=False)
            try:
                return (await bus.get(5)).time_ms
            finally:
                await bus.close()

    assert asyncio.run(got()) == stamps[4]


def test_direct_get_reads_what_the_ordered_consumer_reads(tmp_path: Path) -> None:
    messages = golden()
    store = make_store(tmp_path, messages)
    (everything, heads, tail, first), (by_consumer, heads_by_consumer, tail_by_consumer) = asyncio.run(_both(store))
    assert fields(everything) == fields(by_consumer)
    assert [(m.seq, m.subject, m.data, m.headers) for m in everything] == [
        (m.seq, m.subject, m.data, m.headers) for m in messages
    ]
    assert fields(heads) == fields(heads_by_consumer) and len(heads) > 10
    assert all(m.subject.split(".")[3] == "head" for m in heads)
    assert fields(tail) == fields(tail_by_consumer) and tail[0].seq == 40
    assert [m.seq for m in first] == list(range(1, 31))


def test_a_user_without_direct_get_is_told_so(tmp_path: Path) -> None:
    """The watcher may read the log through consumers but not in Direct Get batches (only the
    reader may: events/bus/permissions.py); the reader may."""
    auth = LocalAuth.create(tmp_path / "creds")
    store = make_store(tmp_path, golden(), auth=auth)

    async def run() -> None:
        async with NatsServer(store_dir=store, auth=auth) as server:

            def read(user: str) -> int:
                with DirectReader(server.url, credentials=auth.credentials(user)) as reader:
                    return sum(1 for _ in reader.messages(last=reader.last_seq()))

            assert await asyncio.to_thread(read, "reader") == len(golden())
            with pytest.raises(DirectUnavailable, match="Permissions Violation"):
                await asyncio.to_thread(read, "watcher")

    asyncio.run(run())


def test_replay_store_with_jobs_finds_the_difference_one_pass_finds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    messages = golden()
    victim = next(m for m in messages if m.headers.get("Kq-Type") == "QuotaReserved")
    messages[victim.seq - 1] = msgspec.structs.replace(
        victim, data=victim.data.replace(b'"cluster-queue"', b'"cluster-queuf"', 1)
    )
    store = make_store(tmp_path, messages)
    assert main(["replay", "--store", str(store)]) == 1
    one_pass = report_lines(capsys.readouterr().out)
    assert f"at #{victim.seq}" in "\n".join(one_pass)
    assert main(["replay", "--store", str(store), "--jobs", "2"]) == 1
    assert report_lines(capsys.readouterr().out) == one_pass
    assert not (tmp_path / "store.checkpoints").exists()
