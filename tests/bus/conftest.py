"""Fixtures that hand each bus test a fresh, empty log of every kind.

The kinds are ``memory`` (:class:`MemoryBus`), ``nats`` (one nats-server from the
wheel) and ``cluster`` (three routed nodes, the stream at R3; marked
``cluster``). Servers start once per session, and only if a selected test needs
them; each test gets empty streams (deleted and recreated) instead of a new
server, which keeps the suite well under a minute on two cores.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator

import nats
import nats.js.errors
import pytest

from kueue_es.events.bus import base, memory, server
from kueue_es.events.bus import nats as nats_bus

BUS_KINDS = ["memory", "nats", pytest.param("cluster", marks=pytest.mark.cluster)]


@pytest.fixture(scope="session")
def nats_server() -> Iterator[server.NatsServer]:
    """One standalone nats-server with JetStream for the whole session."""
    with server.NatsServer() as running:
        yield running


@pytest.fixture(scope="session")
def nats_cluster() -> Iterator[server.NatsCluster]:
    """A 3-node loopback cluster with a meta leader, for the whole session."""
    with server.NatsCluster(3) as running:
        yield running


async def _drop_streams(urls: list[str]) -> None:
    nc = await nats.connect(urls)
    try:
        jsm = nc.jsm(timeout=10)
        for name in (nats_bus.PUBLIC_STREAM_NAME, base.STREAM_NAME):
            with contextlib.suppress(nats.js.errors.NotFoundError):
                await jsm.delete_stream(name)
    finally:
        await nc.close()


class Harness:
    """Opens buses of one kind on one log, and closes them all at teardown.

    ``open()`` is a new connection (a new handle for memory) to the same log, as
    a second process would have; ``urls`` is empty for memory.
    """

    def __init__(self, *, kind: str, urls: list[str], replicas: int) -> None:
        self.kind = kind
        self.urls = urls
        self.replicas = replicas
        self._memory: memory.MemoryBus | None = None
        self._opened: list[base.Bus] = []

    async def open(self) -> base.Bus:
        """A bus on this test's log."""
        bus: base.Bus
        if self.kind == "memory":
            if self._memory is None:
                self._memory = bus = memory.MemoryBus()
            else:
                bus = self._memory.share()
        else:
            bus = await nats_bus.connect(self.urls, replicas=self.replicas)
        self._opened.append(bus)
        return bus

    async def close(self) -> None:
        """Close every bus this harness opened."""
        for bus in reversed(self._opened):
            await bus.close()


@pytest.fixture(params=BUS_KINDS)
async def harness(request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
    """A harness on an empty log of the parametrized kind."""
    kind = request.param
    urls: list[str] = []
    if kind == "nats":
        urls = [request.getfixturevalue("nats_server").url]
    elif kind == "cluster":
        urls = request.getfixturevalue("nats_cluster").urls
    if urls:
        await _drop_streams(urls)
    opened = Harness(kind=kind, urls=urls, replicas=3 if kind == "cluster" else 1)
    yield opened
    await opened.close()


@pytest.fixture
async def bus(harness: Harness) -> base.Bus:
    """An open bus on an empty log of the parametrized kind."""
    return await harness.open()
