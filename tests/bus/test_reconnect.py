"""A restarted nats-server (same store, same port): readers and durable consumers resume at once.

nats-py alone notices a lost ordered consumer only after two idle heartbeats (10 s) and then
tries once; a pull under way waits out its expiry. :class:`NatsBus` resumes every reader from
its position as soon as the connection is back, and says meanwhile that it is not consuming
(:meth:`NatsBus.status`), which /readyz reports (issue 15, point 2).
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from kueue_es.events.bus import base
from kueue_es.events.bus import nats as nats_bus
from tests.restartable import RestartableServer

HEARTBEAT_MISSED_SECONDS = 10.0
"""When nats-py alone would notice a lost ordered consumer (two idle heartbeats of 5 s)."""


@contextlib.asynccontextmanager
async def restartable(tmp_path: Path) -> AsyncIterator[RestartableServer]:
    server = RestartableServer(tmp_path / "nats")
    await server.start_async()
    try:
        yield server
    finally:
        await asyncio.to_thread(server.stop)


def message(n: int) -> base.OutgoingMessage:
    return base.OutgoingMessage(subject="kq.in.wl.default.a", data=str(n).encode(), msg_id=f"m{n}")


async def wait_for(condition, *, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        await asyncio.sleep(0.01)


async def test_a_reader_resumes_from_its_position_as_soon_as_the_server_is_back(tmp_path: Path) -> None:
    """Killed (SIGKILL) and started again three times: the reader is not consuming while the server is
    away, consumes again right after (its consumer made again at once: no heartbeat waited for),
    and reads every message once, in order."""
    async with restartable(tmp_path) as server:
        reader_bus = await nats_bus.connect(server.url)
        writer = await nats_bus.connect(server.url)
        seen: list[tuple[int, bytes, float]] = []

        async def read() -> None:
            async for found in reader_bus.read(subjects=("kq.in.>",)):
                seen.append((found.seq, found.data, time.monotonic()))

        task = asyncio.create_task(read())
        delays: list[float] = []
        try:
            await writer.publish(message(0))
            await wait_for(lambda: len(seen) == 1 and reader_bus.status().caught_up, timeout=10, what="first read")
            assert reader_bus.status() == base.BusStatus(connected=True, readers=1, consuming=1, caught_up=True)
            for n in range(1, 4):
                with capture_logs() as logs:
                    server.kill()
                    await wait_for(lambda: not reader_bus.status().connected, timeout=10, what="disconnected")
                    away = reader_bus.status()
                    assert away.consuming == 0 and not away.caught_up
                    back = server.restart()
                    await wait_for(lambda: reader_bus.status().consuming == 1, timeout=10, what="consuming")
                    consuming = time.monotonic() - back
                    await writer.publish(message(n))
                    await wait_for(lambda n=n: len(seen) == n + 1, timeout=10, what=f"message {n} read")
                delays.append(consuming)
                assert [e["event"] for e in logs if e["event"] == "reader_resumed"] == ["reader_resumed"]
            assert [data for _, data, _ in seen] == [b"0", b"1", b"2", b"3"]
            assert [seq for seq, _, _ in seen] == sorted({seq for seq, _, _ in seen})
            print(
                f"reader consuming again after the restart: p50 {statistics.median(delays):.3f} s, max {max(delays):.3f} s"
            )
            assert max(delays) < HEARTBEAT_MISSED_SECONDS / 2  # on a loaded machine; typically well under 1 s
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, base.BusError):
                await task
            await reader_bus.close()
            await writer.close()


async def test_a_durable_fetch_under_way_asks_again_when_the_connection_is_back(tmp_path: Path) -> None:
    """A fetch waiting for 30 s when the server restarts does not wait out the 30 s: it asks the new
    server at once and gets the message published after the restart."""
    async with restartable(tmp_path) as server:
        bus = await nats_bus.connect(server.url)
        writer = await nats_bus.connect(server.url)
        try:
            consumer = await bus.durable(name="d", subjects=("kq.in.>",))
            assert bus.status().consuming == 1
            fetching = asyncio.ensure_future(consumer.fetch(batch=1, timeout=30.0))
            await asyncio.sleep(0.3)
            server.kill()
            await wait_for(lambda: not bus.status().connected, timeout=10, what="disconnected")
            assert bus.status().consuming == 0
            back = server.restart()
            await wait_for(lambda: bus.status().connected, timeout=10, what="reconnected")
            await writer.publish(message(1))
            async with asyncio.timeout(15):
                deliveries = await fetching
            took = time.monotonic() - back
            assert [d.message.data for d in deliveries] == [b"1"]
            assert bus.status().consuming == 1
            print(f"durable fetch answered {took:.3f} s after the restart")
            assert took < 15
        finally:
            await bus.close()
            await writer.close()


@pytest.mark.parametrize("fault", ["timeout", "no_responders"])
async def test_transient_failures_are_transient_bus_errors(tmp_path: Path, fault: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A publish that times out, or finds no responder, for longer than the bus tries raises
    TransientBusError (services keep trying it, :func:`kueue_es.services.health.keep_trying`), and
    the bus says it is retrying meanwhile."""
    import nats.aio.client
    import nats.errors

    async with restartable(tmp_path) as server:
        bus = await nats_bus.connect(server.url)
        monkeypatch.setattr(nats_bus, "PUBLISH_RETRY_SECONDS", 0.5)
        seen: list[tuple[str, ...]] = []

        async def refuse(self, subject: str, *args, **kwargs):  # type: ignore[no-untyped-def]
            seen.append(bus.status().retrying)
            raise nats.errors.TimeoutError if fault == "timeout" else nats.errors.NoRespondersError

        try:
            monkeypatch.setattr(nats.aio.client.Client, "request", refuse)
            with pytest.raises(base.TransientBusError):
                await bus.publish(message(1))
            assert ("publish",) in seen and bus.status().retrying == ()
        finally:
            monkeypatch.undo()
            await bus.close()
