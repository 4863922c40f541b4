"""Fixtures for the in-process edge tests: an emulated API server, a client for it, one MemoryBus."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from kubernetes_asyncio import client as k8s_client

from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services.kube import client as kube
from kueue_es.sim.emulator import ClusterEmulator, serve_emulator


@pytest.fixture
async def emu() -> AsyncIterator[ClusterEmulator]:
    """A ClusterEmulator (Kueue's Job webhook included) on a free port, with fast bookmarks."""
    async with serve_emulator(bookmark_interval=0.2) as served:
        yield served


@pytest.fixture
async def api(emu: ClusterEmulator) -> AsyncIterator[k8s_client.ApiClient]:
    """A kubernetes-asyncio client for the emulator, always closed after the test."""
    client = await kube.make_api_client(server=emu.url)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
async def bus() -> AsyncIterator[MemoryBus]:
    """One in-process log shared by every service of a test."""
    memory = MemoryBus()
    yield memory
    await memory.close()


@pytest.fixture(autouse=True)
async def no_leftover_tasks() -> AsyncIterator[None]:
    """Fail a test that leaves a service task running (a watch loop, a decider, a consumer)."""
    yield
    await asyncio.sleep(0.01)
    leftovers = [t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()]
    assert not leftovers, f"tasks left running after the test: {leftovers}"
